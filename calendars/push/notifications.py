"""What arrives at the push endpoints, checked, and turned into "fetch this calendar".

A notification only marks its connection changed (``resync_requested`` on the
connection, ``changed_at`` on the work list); the minute job fetches. So an
endpoint answers in one short transaction, well inside Google's and Graph's
deadlines, and a flood costs one sync.

Nothing is believed before it is checked, inside the owner's tenant scope:
the user id a notification names (in Google's channel id, in Graph's
clientState) only chooses the scope; the connection must have that exact
channel or subscription id as its current one, and the secret must match its
digest (constant-time). Anything else — forged, for a stopped channel, for
another user — changes nothing. Google numbers a channel's messages
increasingly, so a number not above the last one seen is a replay and is
ignored.

Graph's notifications carry no number, so a captured one could be sent again.
They are made harmless to replay instead of detected: a change or a
``missed`` only asks for a fetch of the calendar as it is now (a replay costs
one fetch and changes no data), and a lifecycle notification
(``reauthorizationRequired``, ``subscriptionRemoved``) changes no push state
at all. It only brings the channel's maintenance forward to the next minute
job, which asks Graph (``GET /subscriptions/{id}``) and acts on the answer
(:func:`calendars.push.channels.maintain`). A ``reauthorizationRequired``
names the expiry of the subscription it is about; only one about the expiry
we hold is noted (``push_reauthorize_expiry``), so
once answered by a renewal — which moves the expiry — its replays ask nothing.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from calendars.models import CalendarConnection, Provider, PushState
from calendars.providers import normalize as n
from calendars.push import secrets as push_secrets
from calendars.push import worklist
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.push")

GOOGLE_CHANNEL = re.compile(r"^nudge-(?P<user>[1-9][0-9]{0,17})-(?P<connection>[1-9][0-9]{0,17})-")
GRAPH_CLIENT_STATE = re.compile(r"^(?P<user>[1-9][0-9]{0,17})\.(?P<secret>[A-Za-z0-9_-]{1,100})$")
MAX_GRAPH_ITEMS = 1000


class Verdict:
    ACCEPTED = "accepted"  # a change: the connection is marked
    NOTED = "noted"  # genuine, nothing to fetch (Google's first "sync" message)
    REPLAY = "replay"
    REJECTED = "rejected"  # unknown channel, wrong secret, malformed


def google(headers: Mapping[str, str], now: datetime) -> str:
    """One Google notification, from its headers (Google sends no body worth reading)."""
    channel_id = headers.get("X-Goog-Channel-Id", "")
    match = GOOGLE_CHANNEL.match(channel_id)
    try:
        number = int(headers.get("X-Goog-Message-Number", ""))
    except ValueError:
        return Verdict.REJECTED
    state = headers.get("X-Goog-Resource-State", "")
    if match is None or state not in ("sync", "exists", "not_exists"):
        return Verdict.REJECTED
    user_id, connection_id = int(match["user"]), int(match["connection"])
    with tenant_scope(user_id):
        connection = (
            CalendarConnection.objects.select_for_update()
            .filter(pk=connection_id, provider=Provider.GOOGLE, push_channel_id=channel_id)
            .first()
        )
        if (
            connection is None
            or connection.push_resource_id != headers.get("X-Goog-Resource-Id", "")
            or not push_secrets.matches(
                headers.get("X-Goog-Channel-Token", ""), connection.push_secret_digest
            )
        ):
            return Verdict.REJECTED
        if number <= connection.push_message_number:
            return Verdict.REPLAY
        connection.push_message_number = number
        fields = ["push_message_number"]
        if state != "sync":
            connection.resync_requested = True
            fields.append("resync_requested")
        connection.save(update_fields=fields)
    if state == "sync":
        return Verdict.NOTED
    worklist.mark_changed(connection_id, now)
    return Verdict.ACCEPTED


def graph(body: Any, now: datetime, *, lifecycle: bool) -> list[str]:
    """A Graph notification batch (``{"value": [...]}``); one verdict per item."""
    items = body.get("value") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return [Verdict.REJECTED]
    return [_graph_item(item, now, lifecycle) for item in items[:MAX_GRAPH_ITEMS]]


def _graph_item(item: Any, now: datetime, lifecycle: bool) -> str:
    if not isinstance(item, dict):
        return Verdict.REJECTED
    subscription_id = item.get("subscriptionId")
    match = GRAPH_CLIENT_STATE.match(str(item.get("clientState") or ""))
    event = item.get("lifecycleEvent")
    if match is None or not isinstance(subscription_id, str) or not subscription_id:
        return Verdict.REJECTED
    if lifecycle != (event is not None):
        return Verdict.REJECTED  # a change on the lifecycle URL or the reverse: not Graph
    with tenant_scope(int(match["user"])):
        connection = (
            CalendarConnection.objects.select_for_update()
            .filter(provider=Provider.MICROSOFT, push_channel_id=subscription_id[:255])
            .first()
        )
        if connection is None or not push_secrets.matches(
            match["secret"], connection.push_secret_digest
        ):
            return Verdict.REJECTED
        connection_id = connection.pk
        if event in (None, "missed"):
            # "Fetch again": a replay costs one fetch of the calendar as it is now,
            # which changes no stored data.
            connection.resync_requested = True
            connection.save(update_fields=["resync_requested"])
        elif event in ("reauthorizationRequired", "subscriptionRemoved"):
            if connection.push_state != PushState.LIVE:
                return Verdict.NOTED  # already polled, its channel already due a retry
            if event == "reauthorizationRequired":
                _note_reauthorization(connection, item.get("subscriptionExpirationDateTime"))
            live = connection.push_expires_at is not None and connection.push_expires_at > now
            # Nothing else is believed: the minute job asks Graph what is true.
            worklist.schedule(connection_id, now, polling=not live)
            return Verdict.ACCEPTED
        else:
            return Verdict.NOTED
    worklist.mark_changed(connection_id, now)
    return Verdict.ACCEPTED


def same_second(first: datetime, second: datetime) -> bool:
    """Whether two expiries are one: Graph writes fractions of a second its own way."""
    return int(first.timestamp()) == int(second.timestamp())


def _note_reauthorization(connection: CalendarConnection, claimed_expiry: Any) -> None:
    """Note a request to re-authorise the subscription as it is now; one about an
    earlier expiry (already renewed: a replay) or naming none is not noted."""
    try:
        claimed = n.parse_datetime(claimed_expiry, "subscriptionExpirationDateTime")
    except (TypeError, ValueError):
        return
    held = connection.push_expires_at
    if held is None or not same_second(claimed, held):
        return
    connection.push_reauthorize_expiry = held
    connection.save(update_fields=["push_reauthorize_expiry"])
