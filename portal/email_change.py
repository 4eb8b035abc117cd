"""Changing a person's e-mail address: it proves the password, then the new mailbox.

The address is where password-reset links go, so whoever can change it can take
the account. A change therefore:

* asks for the current password (``AccountEmailForm``);
* takes effect only when a link mailed to the *new* address is followed within
  ``LINK_VALID_FOR`` and confirmed there (a POST: a mail scanner's GET changes
  nothing). The link is a ``TimestampSigner`` token (salted, expiring) bound to
  the user, the new address, and the account as it was when asked — its current
  address and password hash — so it works once, and not at all after a password
  change;
* tells the *old* address, when the change is asked for and when it is made;
* refuses an address another account holds without saying so: the page says
  "check your inbox" as for any address, the old address is told as for any
  request, and only the link mail is not sent. Whether an address is taken is
  looked up by a thread after the response, which also sends the mails
  (``start_mailer``), so neither the answer nor its time tells. Confirming
  looks again (the address may have been taken since) and refuses with the
  words any unusable link gets.

The mails go at most ``password_resets_per_address_hour`` to one address and
``password_resets_per_client_hour`` requests from one client an hour, counted
with the reset mails (``signin.reset_allowed``): nobody can flood an inbox with
links through it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import EmailMessage
from django.db import connection
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.translation import gettext as _

from core.executor import spawn

logger = logging.getLogger("nudge.account")

LINK_VALID_FOR = timedelta(hours=24)
_SALT = "portal.email_change"
MAILER_THREAD = "email-change-mail"


def _account_state(user) -> str:
    """What the link is bound to besides the user: the address and the password hash
    now. A change of either (the link's own change included) ends the link."""
    return salted_hmac(_SALT, f"{user.email}\0{user.password}", algorithm="sha256").hexdigest()


def same_address(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def link_token(user, new_address: str) -> str:
    """The signed, expiring token of the confirmation link."""
    return signing.TimestampSigner(salt=_SALT).sign_object(
        {"user": user.pk, "address": new_address, "state": _account_state(user)}
    )


@dataclass(frozen=True)
class Link:
    user: object  # the account, as it is now
    new_address: str


def read_link(token: str) -> Link | None:
    """The account and address a link was made for, or None when it is forged, expired,
    used, made before the password or the address changed, or names an address
    another account holds now."""
    try:
        claim = signing.TimestampSigner(salt=_SALT).unsign_object(token, max_age=LINK_VALID_FOR)
        user_id, new_address, state = claim["user"], claim["address"], claim["state"]
    except (signing.BadSignature, KeyError, TypeError):
        return None
    users = get_user_model().objects
    user = users.filter(pk=user_id, is_active=True).first()
    if user is None or not constant_time_compare(state, _account_state(user)):
        return None
    if users.filter(email__iexact=new_address).exclude(pk=user.pk).exists():
        return None
    return Link(user, new_address)


def make_change(link: Link) -> str:
    """Make the link's address the account's; the old one, for its notice."""
    user = link.user
    old_address = user.email
    user.email = link.new_address
    user.save(update_fields=["email"])
    logger.info("e-mail address changed through its confirmation link")
    return old_address


@dataclass(frozen=True)
class Mails:
    """What one request sends, written in the person's language during the request."""

    new_address: str
    link: EmailMessage
    notice: EmailMessage | None  # to the old address; None without one


def request_mails(user, new_address: str, confirm_url: str) -> Mails:
    """The link for the new address and the notice for the old one (active language)."""
    hours = int(LINK_VALID_FOR.total_seconds() // 3600)
    link = EmailMessage(
        subject=_("Confirm your new e-mail address for nudge"),
        body=_(
            "Someone (we hope you) asked to make this the e-mail address of a nudge "
            "account. To do so, open this link within %(hours)s hours and press "
            "Confirm:\n\n%(link)s\n\nUntil then the account keeps its current address. "
            "If you did not ask for this, ignore this mail."
        )
        % {"hours": hours, "link": confirm_url},
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[new_address],
    )
    notice = None
    if user.email:
        notice = EmailMessage(
            subject=_("A change of your nudge e-mail address was asked for"),
            body=_(
                "Someone signed in to your nudge account asked to change its e-mail "
                "address to %(address)s. Nothing changes unless the link we sent there "
                "is followed within %(hours)s hours.\n\nIf this was not you, change your "
                "password now: whoever asked knew it."
            )
            % {"address": new_address, "hours": hours},
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[user.email],
        )
    return Mails(new_address, link, notice)


def changed_notice(old_address: str, new_address: str) -> EmailMessage | None:
    """The old address is told the change was made (active language)."""
    if not old_address:
        return None
    return EmailMessage(
        subject=_("Your nudge e-mail address was changed"),
        body=_(
            "The e-mail address of your nudge account was changed from %(old)s to "
            "%(new)s. Password reset links now go to the new address.\n\nIf this was "
            "not you, tell support at once."
        )
        % {"old": old_address, "new": new_address},
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[old_address],
    )


def start_mailer(user_id: int, mails: Mails) -> threading.Thread:
    """Look the address up and send the mails after the response (see the docstring)."""
    return spawn(MAILER_THREAD, _send, user_id, mails)


def _send(user_id: int, mails: Mails) -> None:
    try:
        taken = (
            get_user_model()
            .objects.filter(email__iexact=mails.new_address)
            .exclude(pk=user_id)
            .exists()
        )
        if taken:
            logger.info("e-mail change to an address another account holds: no link sent")
        else:
            mails.link.send()
        if mails.notice is not None:
            mails.notice.send()
    except Exception:
        logger.exception("e-mail change mail could not be sent")
    finally:
        connection.close()  # this thread's own connection


def send_now(mail: EmailMessage | None) -> None:
    """A notice whose sending tells nobody anything (the change is already made)."""
    if mail is None:
        return
    try:
        mail.send()
    except Exception:
        logger.exception("e-mail change notice could not be sent")
