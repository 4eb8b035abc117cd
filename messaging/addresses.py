"""Linking an address to a person, only by their own confirmation, and what "/stop" and
"STOP" from it do. Link codes are stored as digests and spent once: a Telegram deep link
names its owner (``<user id>-<secret>``), checked in their scope; a WhatsApp code is six
digits, keyed and bound to its number, and a few wrong tries spend it. An inbound message
names only an address, so the directory (``ChannelAddress``) says whose it is before any
scope is chosen. Changes are re-planned.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.translation import gettext_noop

from accounts.actions import PAUSED_BY_STOP, announce_change, ensure_settings, pause, resume
from accounts.models import AccountNotice, Channel, DeliverySettings
from core.bearer import digest, keyed_digest
from core.config import NudgeConfig
from core.ids import valid_id
from messaging.models import ChannelAddress, LinkCode, OptInRecord
from tenancy.scope import tenant_scope

MAX_CODE_ATTEMPTS = 5
MAX_CODES_PER_HOUR = 5
# Telegram's deep-link payload: up to 64 characters of A-Z a-z 0-9 _ -.
_TELEGRAM_PAYLOAD = re.compile(r"(?P<user>[1-9][0-9]{0,18})-(?P<secret>[A-Za-z0-9_-]{20,44})")


def address_digest(channel: str, address: str) -> str:
    """A keyed digest of a chat id or phone number: not reversible by enumeration."""
    return keyed_digest(f"portal.address.{channel}", address)


@dataclass(frozen=True)
class OwnedSecret:
    user_id: int
    secret: str


def owned_secret(match: re.Match[str] | None) -> OwnedSecret | None:
    # Nineteen digits pass the pattern but may exceed a bigint: no such user, not a crash.
    if match is None or not valid_id(int(match["user"])):
        return None
    return OwnedSecret(int(match["user"]), match["secret"])


def parse_telegram_payload(payload: str) -> OwnedSecret | None:
    return owned_secret(_TELEGRAM_PAYLOAD.fullmatch(payload or ""))


def _issue(
    user_id: int,
    channel: str,
    secret_digest: str,
    now: datetime,
    config: NudgeConfig,
    address: str = "",
) -> None:
    """Store a new code's digest: the user's earlier unused codes for ``channel`` stop
    working, and their codes (and numbers) past ``link_code_retention`` go. Inside the scope."""
    cutoff = now - config.link_code_retention
    LinkCode.objects.filter(user_id=user_id, created_at__lt=cutoff).delete()
    LinkCode.objects.filter(
        user_id=user_id, channel=channel, used_at=None, expires_at__gt=now
    ).update(expires_at=now)
    LinkCode.objects.create(
        user_id=user_id,
        channel=channel,
        address=address,
        secret_digest=secret_digest,
        expires_at=now + config.link_code_lifetime,
    )


def new_telegram_code(user_id: int, now: datetime, config: NudgeConfig) -> str:
    """A fresh deep-link payload (``_issue``)."""
    secret = secrets.token_urlsafe(24)  # 32 characters
    _issue(user_id, Channel.TELEGRAM, digest(secret), now, config)
    return f"{user_id}-{secret}"


def use_telegram_code(owned: OwnedSecret, now: datetime) -> bool:
    """Spend the code once. Inside the owner's scope."""
    spent = LinkCode.objects.filter(
        user_id=owned.user_id,
        channel=Channel.TELEGRAM,
        secret_digest=digest(owned.secret),
        used_at=None,
        expires_at__gt=now,
    ).update(used_at=now)
    return spent == 1


def _code_digest(user_id: int, address: str, code: str) -> str:
    # Six digits are guessable offline from a plain digest: key it, and bind it to the number.
    return keyed_digest("portal.whatsapp.code", f"{user_id}:{address}:{code}")


class TooManyCodes(Exception):
    """More confirmation messages were asked for than the hourly allowance."""


def new_whatsapp_code(user_id: int, address: str, now: datetime, config: NudgeConfig) -> str:
    """A six-digit code for ``address`` (``_issue``). Raises :class:`TooManyCodes` past
    ``MAX_CODES_PER_HOUR`` (each is a paid message)."""
    recent = LinkCode.objects.filter(
        user_id=user_id, channel=Channel.WHATSAPP, created_at__gt=now - timedelta(hours=1)
    )
    if recent.count() >= MAX_CODES_PER_HOUR:
        raise TooManyCodes
    code = f"{secrets.randbelow(1_000_000):06d}"
    _issue(user_id, Channel.WHATSAPP, _code_digest(user_id, address, code), now, config, address)
    return code


def use_whatsapp_code(user_id: int, code: str, now: datetime) -> str | None:
    """The confirmed number when ``code`` is right; counts wrong guesses. Inside the scope."""
    pending = (
        LinkCode.objects.select_for_update()
        .filter(user_id=user_id, channel=Channel.WHATSAPP, used_at=None, expires_at__gt=now)
        .order_by("-created_at")
        .first()
    )
    if pending is None or pending.attempts >= MAX_CODE_ATTEMPTS:
        return None
    expected = _code_digest(user_id, pending.address, code.strip())
    if not hmac.compare_digest(expected, pending.secret_digest):
        pending.attempts += 1
        pending.save(update_fields=["attempts"])
        return None
    pending.used_at = now
    pending.save(update_fields=["used_at"])
    return pending.address


logger = logging.getLogger("nudge.portal")

# The words of the consent record and of account notices are stored in English, as support
# reads them; the person's Settings page translates them (marked here for the catalogs).
# Why an opt-in was withdrawn when another account confirmed the same address...
LINKED_ELSEWHERE = gettext_noop("linked to another account")
# ...and what its previous owner is told.
MOVED_NOTICE = {
    Channel.TELEGRAM: gettext_noop(
        "Your Telegram chat was linked to another nudge account, so it was removed from yours "
        "and your nudges no longer go there. Link Telegram again if it is yours."
    ),
    Channel.WHATSAPP: gettext_noop(
        "Your WhatsApp number was linked to another nudge account, so it was removed from "
        "yours and your nudges no longer go there. Link WhatsApp again if it is yours."
    ),
}


def _remember_address(user_id: int, channel: str, address: str) -> int | None:
    """Point the directory at ``user_id``; the account it named before, if another."""
    entry, _ = ChannelAddress.objects.select_for_update().get_or_create(
        channel=channel,
        address_digest=address_digest(channel, address),
        defaults={"user_id": user_id},
    )
    previous = entry.user_id
    if previous != user_id:
        entry.user_id = user_id
        entry.save(update_fields=["user_id", "updated_at"])
        return previous
    return None


def owner_of(channel: str, address: str) -> int | None:
    """Who linked this chat or number (the directory; not a tenant read)."""
    return (
        ChannelAddress.objects.filter(
            channel=channel, address_digest=address_digest(channel, address)
        )
        .values_list("user_id", flat=True)
        .first()
    )


def link_address(
    user_id: int, channel: str, method: str, now: datetime, spend_code: Callable[[], str | None]
) -> str | None:
    """Spend the user's link code (``spend_code``: the address it confirms, or None) and,
    in the same scope, deliver to that address from now on, recording the opt-in; then
    the former holder loses it and the user is re-planned. The address linked, or None."""
    with tenant_scope(user_id):
        address = spend_code()
        if address is None:
            return None
        delivery = ensure_settings(user_id)
        _set_address(delivery, channel, address, now)
        delivery.channel = channel
        if delivery.paused and delivery.paused_reason in PAUSED_BY_STOP.values():
            resume(delivery)
        delivery.full_clean()
        delivery.save()
        OptInRecord.objects.create(
            user_id=user_id, channel=channel, address=address, method=method, recorded_at=now
        )
        previous = _remember_address(user_id, channel, address)
    if previous is not None:
        release_address(previous, channel, address, now)
    announce_change(user_id, now)
    return address


def release_address(user_id: int, channel: str, address: str, now: datetime) -> bool:
    """Another account confirmed ``address``: clear it from ``user_id`` (in *their*
    scope), withdraw their opt-in, and tell them on their Settings page."""
    with tenant_scope(user_id):
        delivery = DeliverySettings.objects.filter(user_id=user_id).first()
        if delivery is None or delivery.address(channel) != address:
            return False
        _set_address(delivery, channel, "", None)
        if delivery.channel == channel:
            delivery.channel = ""  # not set up: nothing is planned until they link again
        delivery.save()
        OptInRecord.objects.filter(
            user_id=user_id, channel=channel, address=address, withdrawn_at=None
        ).update(withdrawn_at=now, withdrawn_how=LINKED_ELSEWHERE)
        AccountNotice.objects.create(user_id=user_id, created_at=now, text=MOVED_NOTICE[channel])
    logger.warning("address moved to another account", extra={"user_id": user_id})
    announce_change(user_id, now)
    return True


def _set_address(
    delivery: DeliverySettings, channel: str, address: str, opted_in_at: datetime | None
) -> None:
    """Write (or clear) the ``channel`` address, which is no longer known unreachable."""
    if channel == Channel.TELEGRAM:
        delivery.telegram_chat_id = address
    else:
        delivery.whatsapp_number = address
        delivery.whatsapp_opted_in_at = opted_in_at
    if delivery.unreachable_channel == channel:
        delivery.unreachable_channel = delivery.unreachable_reason = ""
        delivery.unreachable_at = None


@dataclass(frozen=True)
class InboundResult:
    """What an inbound command did, for the bot's answer and for tests."""

    user_id: int | None
    changed: bool


# How a START-like message records the opt-in it restores.
RESUMED_BY = {
    Channel.TELEGRAM: gettext_noop("sent /start in Telegram"),
    Channel.WHATSAPP: gettext_noop("replied START on WhatsApp"),
}


def stop_or_start(channel: str, address: str, command: str, now: datetime) -> InboundResult:
    """A STOP-like message (``command`` "stop") from a linked ``address`` pauses its
    owner's nudges (all of them: "stop" means stop, whichever channel is in use) and
    withdraws the opt-in; a START-like one ("start") resumes nudges that the same
    channel's STOP paused, recording the opt-in again."""
    user_id = owner_of(channel, address)
    if user_id is None:
        return InboundResult(None, False)
    stop_reason = PAUSED_BY_STOP[channel]
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        if delivery.address(channel) != address:
            return InboundResult(None, False)  # the user has moved on from this address
        opt_in = {"user_id": user_id, "channel": channel, "address": address}
        if command == "stop":
            changed = not delivery.paused
            if changed:
                pause(delivery, stop_reason, now)
            OptInRecord.objects.filter(**opt_in, withdrawn_at=None).update(
                withdrawn_at=now, withdrawn_how=stop_reason
            )
        else:
            changed = delivery.paused and delivery.paused_reason == stop_reason
            if changed:
                resume(delivery)
                OptInRecord.objects.create(**opt_in, method=RESUMED_BY[channel], recorded_at=now)
        if changed:
            delivery.save()
    if changed:
        announce_change(user_id, now)
    return InboundResult(user_id, changed)
