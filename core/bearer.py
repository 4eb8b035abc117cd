"""The credentials of an ``Authorization: Bearer <token>`` header (the scheme is caseless)."""

from __future__ import annotations

from django.http import HttpRequest


def bearer_token(request: HttpRequest) -> str:
    """The request's bearer token, or "" when it carries none."""
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""
