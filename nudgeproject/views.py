"""Site-wide pages that belong to no room: what a refused form says.

Django's own CSRF failure page carries an inline ``<style>`` without the
response's CSP nonce (the browser refuses it and logs a violation) and speaks
to developers ("CSRF verification failed", reasons about Referer headers).
This one is a page of the site: its stylesheet carries the nonce like every
other page's, and it tells the person what happened and what to do. Django
logs the reason (``django.security.csrf``); the page does not show it.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form came without a valid CSRF token (403)."""
    return render(request, "csrf_failure.html", status=403)
