"""Sign-in throttled by django-axes per account *and* client address, so a stranger locks no one
else out: after ``signin_failure_limit`` failures, 429 for ``signin_lockout`` before any hash; a
try while locked is not recorded, and a completed reset lifts the lock. Password reset is limited
per address and client and mails from a thread after the commit, so neither its answer nor its
time tells who has an account."""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from axes.utils import reset as reset_sign_in_locks
from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm
from django.db import transaction
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from core.bearer import keyed_digest
from core.config import NudgeConfig
from core.executor import spawn, thread_body
from portal.models import PasswordResetRequest

logger = logging.getLogger("nudge.signin")


class ThrottledSignIn(AxesStandaloneBackend):
    """django-axes' lockout check; without a request (the test client's ``login()``, code
    checking a password) there is no client's sign-in to count."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def client_address(request: HttpRequest) -> str:
    """The client's address: behind the TLS proxy, the last ``X-Forwarded-For`` entry
    (the proxy's; earlier ones are the client's to write)."""
    if settings.SECURE_PROXY_SSL_HEADER:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded
    return request.META.get("REMOTE_ADDR", "")


def failure_limit(request: HttpRequest, credentials: dict | None) -> int:
    """Failed sign-ins allowed per account and per client (``AXES_FAILURE_LIMIT``)."""
    return NudgeConfig.from_settings().signin_failure_limit


def lockout_duration(request: HttpRequest | None = None) -> timedelta:
    """How long a lock lasts (``AXES_COOLOFF_TIME``)."""
    return NudgeConfig.from_settings().signin_lockout


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The page a locked-out sign-in gets, on either login page (``AXES_LOCKOUT_CALLABLE``):
    the lock lasts at most a cool-off from this name's latest recorded failure from this
    address (tries while locked are not recorded, so it never grows)."""
    lockout = lockout_duration(request)
    latest = AccessAttempt.objects.filter(
        username=get_client_username(request, credentials),
        ip_address=getattr(request, "axes_ip_address", None) or client_address(request),
    ).aggregate(latest=Max("attempt_time"))["latest"]
    left = lockout if latest is None else latest + lockout - timezone.now()
    seconds = math.ceil(min(lockout, max(timedelta(seconds=1), left)).total_seconds())
    minutes = math.ceil(seconds / 60)
    response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(seconds)
    return response


class UnlockingSetPasswordForm(SetPasswordForm):
    """The reset link's new-password form: following the mailed link proves the mailbox,
    so setting the password lifts the account's locks from every address."""

    def save(self, commit: bool = True) -> Any:
        user = super().save(commit=commit)
        if commit:
            lifted = reset_sign_in_locks(username=user.get_username())
            if lifted:
                logger.info("a password reset lifted the account's sign-in locks")
        return user


def reset_allowed(address: str, client: str, now: datetime, config: NudgeConfig) -> bool:
    """Record a reset request unless the address or the client is over its hourly limit."""
    by_address = keyed_digest("portal.password_reset.address", address.strip().lower())
    by_client = keyed_digest("portal.password_reset.client", client)
    hour_ago = now - timedelta(hours=1)
    with transaction.atomic():
        PasswordResetRequest.objects.filter(requested_at__lt=hour_ago).delete()
        recent = PasswordResetRequest.objects.filter(requested_at__gte=hour_ago)
        if (
            recent.filter(address_digest=by_address).count()
            >= config.password_resets_per_address_hour
            or recent.filter(client_digest=by_client).count()
            >= config.password_resets_per_client_hour
        ):
            return False
        PasswordResetRequest.objects.create(
            address_digest=by_address, client_digest=by_client, requested_at=now
        )
    return True


class ThrottledPasswordResetForm(PasswordResetForm):
    """Django's reset form, limited per address and client, mailing after the response."""

    def save(self, request: HttpRequest | None = None, **options: Any) -> None:
        email = self.cleaned_data["email"]
        if request is None or not reset_allowed(
            email, client_address(request), timezone.now(), NudgeConfig.from_settings()
        ):
            logger.warning(
                "password reset refused: over the hourly limit for the address or client"
            )
            return
        # The thread has no request: the link's host is taken now.
        options["domain_override"] = request.get_host()
        transaction.on_commit(
            lambda: spawn("password-reset-mail", _send_reset_mail, email, options)
        )


def _send_reset_mail(email: str, options: dict) -> None:
    """Look the address up and mail each of its active users (Django's own form does it)."""
    with thread_body(logger, "password reset mail could not be sent"):
        form = PasswordResetForm({"email": email})
        if form.is_valid():
            form.save(**options)
