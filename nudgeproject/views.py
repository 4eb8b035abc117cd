"""What a refused form says: Django's own CSRF page has an inline ``<style>`` the CSP
blocks and speaks to developers; this one is a page of the site, in plain words
(Django logs the reason, ``django.security.csrf``).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form came without a valid CSRF token (403)."""
    return render(request, "csrf_failure.html", status=403)
