"""Changing a person's e-mail address: the password, then a signed, expiring link to the new
address, bound to the account's current address and password hash (it works once and dies with a
password change); following it asks for a Confirm (a mail scanner's GET changes nothing). The old
address is told at both steps. A taken address is refused in silence: a thread after the response
looks it up and mails, within the reset mails' hourly limits (``signin.reset_allowed``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.mail import EmailMessage
from django.db import transaction
from django.utils.crypto import constant_time_compare
from django.utils.translation import gettext as _

from core.bearer import keyed_digest
from core.executor import spawn, thread_body

logger = logging.getLogger("nudge.account")

LINK_VALID_FOR = timedelta(hours=24)
_SALT = "portal.email_change"
MAILER_THREAD = "email-change-mail"


def _account_state(user) -> str:
    """What the link is bound to besides the user: the address and the password hash
    now. A change of either (the link's own change included) ends the link."""
    return keyed_digest(_SALT, f"{user.email}\0{user.password}")


def _taken(address: str, user_id: int) -> bool:
    return get_user_model().objects.filter(email__iexact=address).exclude(pk=user_id).exists()


def same_address(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def link_token(user, new_address: str) -> str:
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
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not constant_time_compare(state, _account_state(user)):
        return None
    if _taken(new_address, user.pk):
        return None
    return Link(user, new_address)


def _mail(to: str, subject: str, body: str) -> EmailMessage:
    return EmailMessage(subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL, to=[to])


def request_change(user, new_address: str, confirm_url: str) -> None:
    """Once the request commits, a thread mails the link to the new address (unless another
    account holds it) and the notice to the old one, if any; both are written now, in the
    person's language."""
    hours = int(LINK_VALID_FOR.total_seconds() // 3600)
    mails = [
        _mail(
            new_address,
            _("Confirm your new e-mail address for nudge"),
            _(
                "Someone (we hope you) asked to make this the e-mail address of a nudge "
                "account. To do so, open this link within %(hours)s hours and press "
                "Confirm:\n\n%(link)s\n\nUntil then the account keeps its current address. "
                "If you did not ask for this, ignore this mail."
            )
            % {"hours": hours, "link": confirm_url},
        )
    ]
    if user.email:
        mails.append(
            _mail(
                user.email,
                _("A change of your nudge e-mail address was asked for"),
                _(
                    "Someone signed in to your nudge account asked to change its e-mail "
                    "address to %(address)s. Nothing changes unless the link we sent there "
                    "is followed within %(hours)s hours.\n\nIf this was not you, change your "
                    "password now: whoever asked knew it."
                )
                % {"address": new_address, "hours": hours},
            )
        )
    transaction.on_commit(lambda: spawn(MAILER_THREAD, _send, user.pk, mails))


def make_change(link: Link) -> None:
    """Make the link's address the account's and tell the old one (active language); the
    change is made, so a notice that cannot be sent is only logged."""
    user, old_address = link.user, link.user.email
    user.email = link.new_address
    user.save(update_fields=["email"])
    logger.info("e-mail address changed through its confirmation link")
    if not old_address:
        return
    try:
        _mail(
            old_address,
            _("Your nudge e-mail address was changed"),
            _(
                "The e-mail address of your nudge account was changed from %(old)s to "
                "%(new)s. Password reset links now go to the new address.\n\nIf this was "
                "not you, tell support at once."
            )
            % {"old": old_address, "new": link.new_address},
        ).send()
    except Exception:
        logger.exception("e-mail change notice could not be sent")


def _send(user_id: int, mails: list[EmailMessage]) -> None:
    link, *notice = mails
    with thread_body(logger, "e-mail change mail could not be sent"):
        if _taken(link.to[0], user_id):
            logger.info("e-mail change to an address another account holds: no link sent")
        else:
            link.send()
        for mail in notice:
            mail.send()
