"""Sign-in resists guessing without letting a stranger lock anyone out; password
reset tells nothing and floods nobody.

* **Sign-in throttling** is django-axes (a maintained Jazzband package that
  supports Django 5.2; it hooks Django's own ``authenticate``, so both
  ``/accounts/login/`` and ``/admin/login/`` are covered by one backend). Its
  count is kept per *account and client address together*
  (``AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]``): after
  ``signin_failure_limit`` failures at one name from one address, that name is
  refused *from that address* for ``signin_lockout`` (``AXES_COOLOFF_TIME``),
  before any password is hashed; the page says so (``registration/locked_out.html``,
  HTTP 429, ``Retry-After``). The owner signing in from anywhere else, and every
  other account from that address — staff on ``/admin/login/`` included — are
  not affected.

  How axes counts: one row per (name, address, user agent) holds the failures
  and the time of the last one; the rows newer than the cool-off are summed. A
  count therefore lives as long as failures come less than a cool-off apart and
  starts again after a cool-off of quiet. With axes' default
  (``AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = True``) a try *while
  locked* is recorded too and moves that time forward, so one try every 14
  minutes kept a 15-minute lock forever; it is off here: a locked try is refused
  unchecked and not recorded, and the lock ends one cool-off after the failure
  that reached the limit. (``AXES_USE_ATTEMPT_EXPIRATION`` would not help: its
  expiry is pushed later by each failure the same way, and the lock check still
  reads the last failure's time.)

  Ways back: the lock ends by itself; a completed password reset lifts every
  lock on the account (:class:`UnlockingSetPasswordForm`, axes' ``reset``);
  support deletes the "access attempt" rows in the admin, or runs
  ``manage.py axes_reset_username NAME``.
* **Password reset** counts requests per address and per client address in a
  table of keyed digests, and sends the mail from a thread started after the
  request's commit: the request does the same work whether or not the address
  belongs to anyone, so neither its answer nor its time tells.
"""

from __future__ import annotations

import logging
import math
import threading
from datetime import datetime, timedelta
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from axes.utils import reset as reset_sign_in_locks
from django.conf import settings
from django.contrib.auth.forms import PasswordResetForm, SetPasswordForm
from django.db import connection, transaction
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.config import NudgeConfig
from core.executor import spawn
from portal.models import PasswordResetRequest

logger = logging.getLogger("nudge.signin")


class ThrottledSignIn(AxesStandaloneBackend):
    """django-axes' lockout check, first in ``AUTHENTICATION_BACKENDS``.

    ``authenticate`` without a request is no client's sign-in (the test
    client's ``login()``, code checking a password): there is nothing to count.
    """

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def client_address(request: HttpRequest) -> str:
    """The client's address: behind the TLS proxy, the one the proxy appended last.

    Earlier ``X-Forwarded-For`` entries are the client's to write, so a
    guesser could pose as anyone; the last one is the proxy's.
    """
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


def lock_left(request: HttpRequest, credentials: dict | None) -> timedelta:
    """At most how long this name stays locked from this address: a cool-off from its
    latest recorded failure (tries while locked are not recorded, so this never grows)."""
    lockout = lockout_duration(request)
    latest = AccessAttempt.objects.filter(
        username=get_client_username(request, credentials),
        ip_address=getattr(request, "axes_ip_address", None) or client_address(request),
    ).aggregate(latest=Max("attempt_time"))["latest"]
    if latest is None:
        return lockout
    return min(lockout, max(timedelta(seconds=1), latest + lockout - timezone.now()))


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The page a locked-out sign-in gets, on either login page (``AXES_LOCKOUT_CALLABLE``)."""
    seconds = math.ceil(lock_left(request, credentials).total_seconds())
    minutes = math.ceil(seconds / 60)
    response = render(request, "registration/locked_out.html", {"minutes": minutes}, status=429)
    response["Retry-After"] = str(seconds)
    return response


class UnlockingSetPasswordForm(SetPasswordForm):
    """The reset link's new-password form: setting the password lifts the account's locks.

    Following the mailed link proves the mailbox, which is what a lock guards the
    password of; every address's count for the name goes (a guesser's too: their
    guesses were at the old password).
    """

    def save(self, commit: bool = True) -> Any:
        user = super().save(commit=commit)
        if commit:
            lifted = reset_sign_in_locks(username=user.get_username())
            if lifted:
                logger.info("a password reset lifted the account's sign-in locks")
        return user


def _digest(kind: str, value: str) -> str:
    return salted_hmac(f"portal.password_reset.{kind}", value, algorithm="sha256").hexdigest()


def reset_allowed(address: str, client: str, now: datetime, config: NudgeConfig) -> bool:
    """Record a reset request unless the address or the client is over its hourly limit."""
    by_address = _digest("address", address.strip().lower())
    by_client = _digest("client", client)
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

    def save(
        self,
        domain_override: str | None = None,
        subject_template_name: str = "registration/password_reset_subject.txt",
        email_template_name: str = "registration/password_reset_email.html",
        use_https: bool = False,
        token_generator: Any = None,
        from_email: str | None = None,
        request: HttpRequest | None = None,
        html_email_template_name: str | None = None,
        extra_email_context: dict | None = None,
    ) -> None:
        email = self.cleaned_data["email"]
        if request is None or not reset_allowed(
            email, client_address(request), timezone.now(), NudgeConfig.from_settings()
        ):
            logger.warning(
                "password reset refused: over the hourly limit for the address or client"
            )
            return
        options = {
            # The thread has no request: the link's host and scheme are taken now.
            "domain_override": domain_override or request.get_host(),
            "subject_template_name": subject_template_name,
            "email_template_name": email_template_name,
            "use_https": use_https,
            "from_email": from_email,
            "html_email_template_name": html_email_template_name,
            "extra_email_context": extra_email_context,
        }
        if token_generator is not None:
            options["token_generator"] = token_generator
        transaction.on_commit(lambda: start_mailer(email, options))


def start_mailer(email: str, options: dict) -> threading.Thread:
    return spawn("password-reset-mail", _send_reset_mail, email, options)


def _send_reset_mail(email: str, options: dict) -> None:
    """Look the address up and mail each of its active users (Django's own form does it)."""
    try:
        form = PasswordResetForm({"email": email})
        if form.is_valid():
            form.save(**options)
    except Exception:
        logger.exception("password reset mail could not be sent")
    finally:
        connection.close()  # this thread's own connection
