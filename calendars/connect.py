"""Creating connections: an ICS feed address, or the tokens from an OAuth callback; no
tenant scope is open during a network call. A feed on a private address is refused unless
allowed (``connect_ics --allow-private``, stored and re-checked on every fetch); ``DEBUG``
does not relax it.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext, gettext_noop, ngettext

from calendars.models import CalendarConnection, ConnectionStatus, Provider
from calendars.push import worklist
from calendars.snapshot import snapshot_of
from calendars.sync import FetchJob, write_job
from core.config import NudgeConfig
from providers import crypto, ics
from providers.base import ProviderError
from providers.ics import check_feed_url, feed_address, feed_host
from providers.oauth import TokenGrant
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars")

# One refusal for every cause, so a user cannot map internal names through the form.
REFUSED = gettext_noop(
    "This address cannot be used. Give the public http(s) address of the calendar "
    "(the ICS or iCal link your calendar service shows)."
)


class ConnectError(Exception):
    """The connection could not be made; the message is safe to show."""


def check_calendar_cap(user_id: int, cap: int, adding: int = 1) -> None:
    """Refuse ``adding`` more calendars past ``cap`` (NUDGE_MAX_CALENDARS_PER_USER). Inside
    the scope."""
    held = (
        CalendarConnection.objects.filter(user_id=user_id).exclude(provider=Provider.LOCAL).count()
    )
    figures = {"held": held, "cap": cap, "left": cap - held + 1}
    if held >= cap:
        raise ConnectError(
            ngettext(
                "You have %(held)s calendar connected, the most allowed (%(cap)s). "
                "Disconnect it to add another.",
                "You have %(held)s calendars connected, the most allowed (%(cap)s). "
                "Disconnect one to add another.",
                held,
            )
            % figures
        )
    if held + adding > cap:
        raise ConnectError(
            ngettext(
                "You have %(held)s calendar connected and the most allowed is %(cap)s: "
                "choose at most %(left)s of these.",
                "You have %(held)s calendars connected and the most allowed is %(cap)s: "
                "choose at most %(left)s of these.",
                held,
            )
            % figures
        )


def feed_fields(
    user_id: int, url: str, *, allow_private: bool, say_why: bool = False
) -> dict[str, object]:
    """A feed connection's fields, its address read as fetched, vetted and encrypted.
    An address the server will not fetch is refused: to a user in the same words
    whatever the cause; to the operator's command line (``say_why``) with the cause,
    and for a private one the way to allow it."""
    url = feed_address(url)
    try:
        check_feed_url(url, allow_private=allow_private)
    except ProviderError as exc:
        reason = crypto.scrub(str(exc), url)
        logger.info("refused an ICS address", extra={"user_id": user_id, "reason": reason})
        # Translated for the user; the constant stays English for the log.
        if say_why and "private or local address" in reason and not allow_private:
            reason += " (a feed on this machine or your own network: add --allow-private)"
        raise ConnectError(reason if say_why else gettext(REFUSED)) from None
    return {
        "provider": Provider.ICS,
        "account": feed_host(url)[:255],
        "feed_url_encrypted": crypto.encrypt(url),
        "allow_private_network": allow_private,
    }


def add_ics_feed(
    user_id: int, url: str, *, config: NudgeConfig, allow_private: bool = False
) -> CalendarConnection:
    """The website's connect: validate the address and store it for its first fetch."""
    fields = feed_fields(user_id, url, allow_private=allow_private)
    return store_for_first_fetch(user_id, config, **fields)


def store_for_first_fetch(
    user_id: int, config: NudgeConfig, **fields: object
) -> CalendarConnection:
    """A new feed or CalDAV account within the cap, stored for its first fetch."""
    with tenant_scope(user_id):
        check_calendar_cap(user_id, config.max_calendars_per_user)
        connection = CalendarConnection(user_id=user_id, calendar_id="", **fields)
        refetch_in_full(connection, timezone.now())
        return connection


def refetch_in_full(
    connection: CalendarConnection, now: datetime, *, push_capable: bool = False
) -> None:
    """Save the connection asking a full sync, which the minute job does (marked in the
    caller's transaction), so a slow server never holds a web worker."""
    connection.resync_requested = True
    connection.save()
    worklist.request_fetch(connection.pk, connection.user_id, now, push_capable=push_capable)


def connect_ics_feed(
    user_id: int,
    url: str,
    *,
    config: NudgeConfig,
    allow_private: bool = False,
    now: datetime | None = None,
) -> CalendarConnection:
    """Validate the address, fetch and parse the feed once, then store it encrypted (the
    command line's connect, for a user it has found, which may wait for the feed)."""
    now = now or timezone.now()
    fields = feed_fields(user_id, url, allow_private=allow_private, say_why=True)
    connection = CalendarConnection(user_id=user_id, calendar_id="", **fields)
    window_start, window_end = config.subject_window(now)
    with tenant_scope(user_id):
        check_calendar_cap(user_id, config.max_calendars_per_user)
        snapshot = snapshot_of(connection, config)
    try:
        fetched = ics.fetch(snapshot, now=now, window_start=window_start, window_end=window_end)
    except ProviderError as exc:
        raise ConnectError(crypto.scrub(str(exc), snapshot.feed_url)) from None
    connection.account = (fetched.calendar_name or connection.account)[:255]
    with tenant_scope(user_id):
        connection.save()
    # The first copy is written as every sync writes it.
    write_job(FetchJob(user_id, connection.pk, Provider.ICS, snapshot, fetched=fetched), now)
    return connection


def store_oauth_connection(
    user_id: int, provider: str, *, account: str, grant: TokenGrant, config: NudgeConfig
) -> CalendarConnection:
    """Create the user's connection for this account, or give an existing one new tokens
    (which repairs a ``needs_reauth`` one: the status is reset and a full sync asked)."""
    with tenant_scope(user_id):
        connection = CalendarConnection.objects.filter(
            user_id=user_id, provider=provider, account=account[:255]
        ).first()
        if connection is None:
            check_calendar_cap(user_id, config.max_calendars_per_user)
            connection = CalendarConnection(
                user_id=user_id, provider=provider, account=account[:255]
            )
        connection.access_token_encrypted = crypto.encrypt(grant.access_token)
        if grant.refresh_token:
            connection.refresh_token_encrypted = crypto.encrypt(grant.refresh_token)
        connection.token_expires_at = grant.expires_at
        connection.status = ConnectionStatus.ACTIVE
        connection.last_error = ""
        connection.retry_after = None
        # In the same transaction: the first fetch, and a push channel due now.
        now = timezone.now()
        refetch_in_full(connection, now, push_capable=True)
        worklist.enroll(connection.pk, user_id, now)
    return connection
