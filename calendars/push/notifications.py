"""What arrives at the push endpoints, checked, and turned into "fetch this calendar"
(the minute job fetches, so a flood costs one sync).

Nothing is believed before it is checked in the owner's tenant scope: the connection must
hold that exact channel or subscription id (or, for a channel being made, the pending one)
and the secret must match its digest. A Google message number not above the last is a
replay, and becomes the new mark only within ``MESSAGE_NUMBER_WINDOW`` of it. A Graph batch
is capped, shape-checked before any database work, checked once per (subscription,
clientState) group, and ends at the first forged group. Graph carries no number, so its
notifications are harmless to replay: a change asks for a fetch, a lifecycle one only
brings maintenance forward, and ``reauthorizationRequired`` is noted only about the
expiry we hold.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db.models import Q

from calendars.models import CalendarConnection, Provider, PushState
from calendars.push import worklist
from core.bearer import digest, is_secret
from core.ids import MAX_ID
from providers import normalize as n
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.push")

GOOGLE_CHANNEL = re.compile(r"^nudge-(?P<user>[1-9][0-9]{0,17})-(?P<connection>[1-9][0-9]{0,17})-")
GRAPH_CLIENT_STATE = re.compile(r"^(?P<user>[1-9][0-9]{0,17})\.(?P<secret>[A-Za-z0-9_-]{1,100})$")
# A Graph notification is under a kilobyte; a batch of a thousand fits.
MAX_GRAPH_BODY_BYTES = 1024 * 1024
MAX_GRAPH_ITEMS = 1000
MAX_SUBSCRIPTION_ID = 255  # the column's length
# Google's X-Goog-Message-Number: digits, within PostgreSQL's bigint.
MESSAGE_NUMBER = re.compile(r"[0-9]{1,19}")
# How far ahead of the last number one may be and still become the new mark.
MESSAGE_NUMBER_WINDOW = 1_000_000


class Verdict:
    ACCEPTED = "accepted"  # a change: the connection is marked
    NOTED = "noted"  # genuine, nothing to fetch (Google's first "sync" message)
    REPLAY = "replay"
    REJECTED = "rejected"  # unknown channel, wrong secret, malformed


def google(headers: Mapping[str, str], now: datetime) -> str:
    """One Google notification, from its headers (Google sends no body worth reading)."""
    channel_id = headers.get("X-Goog-Channel-Id", "")
    match = GOOGLE_CHANNEL.match(channel_id)
    number = message_number(headers.get("X-Goog-Message-Number", ""))
    state = headers.get("X-Goog-Resource-State", "")
    if match is None or number is None or state not in ("sync", "exists", "not_exists"):
        return Verdict.REJECTED
    user_id, connection_id = int(match["user"]), int(match["connection"])
    with tenant_scope(user_id):
        connection = (
            CalendarConnection.objects.select_for_update()
            .filter(pk=connection_id, provider=Provider.GOOGLE)
            .filter(Q(push_channel_id=channel_id) | Q(push_pending_channel_id=channel_id))
            .first()
        )
        if connection is None:
            return Verdict.REJECTED
        # A channel being made (Google may post before its answer is stored) is checked
        # against the pending record's secret; its resource id and numbering are not
        # known yet, so its change only asks for a fetch, harmless to replay (like Graph's).
        live = connection.push_channel_id == channel_id
        stored = connection.push_secret_digest if live else connection.push_pending_digest
        if not is_secret(digest(headers.get("X-Goog-Channel-Token", "")), stored):
            return Verdict.REJECTED
        fields = []
        if live:
            if connection.push_resource_id != headers.get("X-Goog-Resource-Id", ""):
                return Verdict.REJECTED
            if number <= connection.push_message_number:
                return Verdict.REPLAY
            if number - connection.push_message_number <= MESSAGE_NUMBER_WINDOW:
                connection.push_message_number = number
                fields.append("push_message_number")
            else:
                logger.info(
                    "a Google message number far ahead of the last one was not kept as the mark",
                    extra={"connection_id": connection.pk},
                )
        if state != "sync":
            connection.resync_requested = True
            fields.append("resync_requested")
        if fields:
            connection.save(update_fields=fields)
    if state == "sync":
        return Verdict.NOTED
    worklist.mark_changed(connection_id, now)
    return Verdict.ACCEPTED


def message_number(raw: str) -> int | None:
    """Google's message number from its header; None unless it is plain digits
    within PostgreSQL's bigint (no sign, no spaces, no other scripts' digits)."""
    if not MESSAGE_NUMBER.fullmatch(raw):
        return None
    number = int(raw)
    return number if number <= MAX_ID else None


def graph(body: Any, now: datetime, *, lifecycle: bool) -> list[str]:
    """A Graph notification batch (``{"value": [...]}``); one verdict per item. The
    first group that fails its check ends the batch: it and every later group are
    rejected unlooked-at, so a thousand forged items cost one check."""
    items = body.get("value") if isinstance(body, dict) else None
    if not isinstance(items, list) or not items or len(items) > MAX_GRAPH_ITEMS:
        return [Verdict.REJECTED]
    verdicts = [Verdict.REJECTED] * len(items)
    # The items naming one subscription with one clientState: (index, item) by (user
    # id, subscription id, secret).
    groups: dict[tuple[int, str, str], list[tuple[int, dict[str, Any]]]] = {}
    for index, item in enumerate(items):
        if (shaped := _shaped(item, lifecycle)) is not None:
            groups.setdefault(shaped, []).append((index, item))
    for named, group in groups.items():
        outcome = _graph_group(*named, group, now)
        if outcome is None:
            break  # forged: nothing after it is looked at
        for index, verdict in outcome.items():
            verdicts[index] = verdict
    return verdicts


def _shaped(item: Any, lifecycle: bool) -> tuple[int, str, str] | None:
    """(user id, subscription id, secret) of an item shaped like Graph's, else None."""
    if not isinstance(item, dict):
        return None
    subscription_id = item.get("subscriptionId")
    client_state = item.get("clientState")
    if not isinstance(subscription_id, str) or not isinstance(client_state, str):
        return None
    if not 0 < len(subscription_id) <= MAX_SUBSCRIPTION_ID:
        return None
    match = GRAPH_CLIENT_STATE.match(client_state)
    if match is None:
        return None
    if lifecycle != (item.get("lifecycleEvent") is not None):
        return None  # a change on the lifecycle URL or the reverse: not Graph
    return int(match["user"]), subscription_id, match["secret"]


def _graph_group(
    user_id: int,
    subscription_id: str,
    secret: str,
    group: list[tuple[int, dict[str, Any]]],
    now: datetime,
) -> dict[int, str] | None:
    """Each item's verdict, once the group's subscription and secret are checked;
    None when they are not ours (forged, stopped, another user's)."""
    verdicts: dict[int, str] = {}
    changed = False
    with tenant_scope(user_id):
        # One look: the subscription stored, or one made a moment ago whose id is not
        # stored yet, known by its secret alone (a forged group costs the same either way).
        found = list(
            CalendarConnection.objects.select_for_update().filter(
                Q(push_channel_id=subscription_id) | Q(push_pending_digest=digest(secret)),
                provider=Provider.MICROSOFT,
            )[:2]
        )
        stored = [c for c in found if c.push_channel_id == subscription_id]
        connection = (stored or found or [None])[0]
        pending = not stored
        if connection is None:
            return None
        held = connection.push_pending_digest if pending else connection.push_secret_digest
        if not is_secret(digest(secret), held):
            return None
        for index, item in group:
            event = item.get("lifecycleEvent")
            if event in (None, "missed"):  # a change: the group marks the connection once
                verdicts[index] = Verdict.ACCEPTED
                changed = True
            elif pending:  # no state to keep yet: its lifecycle items are only noted
                verdicts[index] = Verdict.NOTED
            else:
                verdicts[index] = _lifecycle(connection, event, item, now)
        if changed:
            connection.resync_requested = True
            connection.save(update_fields=["resync_requested"])
    if changed:
        worklist.mark_changed(connection.pk, now)
    return verdicts


def _lifecycle(
    connection: CalendarConnection, event: str, item: dict[str, Any], now: datetime
) -> str:
    """One checked lifecycle item of ``connection``'s subscription; in its owner's scope."""
    if event not in ("reauthorizationRequired", "subscriptionRemoved"):
        return Verdict.NOTED
    if connection.push_state != PushState.LIVE:
        return Verdict.NOTED  # already polled, its channel already due a retry
    if event == "reauthorizationRequired":
        _note_reauthorization(connection, item.get("subscriptionExpirationDateTime"))
    live = connection.push_expires_at is not None and connection.push_expires_at > now
    # Nothing else is believed: the minute job asks Graph what is true.
    worklist.schedule(connection.pk, now, polling=not live)
    return Verdict.ACCEPTED


def _note_reauthorization(connection: CalendarConnection, claimed_expiry: Any) -> None:
    """Note a request to re-authorise the subscription as it is now; one about an
    earlier expiry (already renewed: a replay) or naming none is not noted."""
    try:
        claimed = n.parse_datetime(claimed_expiry, "subscriptionExpirationDateTime")
    except (TypeError, ValueError):
        return
    held = connection.push_expires_at
    # To the second: Graph writes fractions of a second its own way.
    if held is None or int(claimed.timestamp()) != int(held.timestamp()):
        return
    connection.push_reauthorize_expiry = held
    connection.save(update_fields=["push_reauthorize_expiry"])
