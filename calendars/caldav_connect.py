"""Connecting a CalDAV account (iCloud, Fastmail, Nextcloud, any server), never calling
the server from a web request: ``add_account`` vets the address and stores the password
encrypted, and the minute job's first fetch discovers the calendars into ``sync_state``;
``choose_calendars`` makes a row per chosen calendar (only addresses discovery found);
``renew_password`` answers a 401. The password is never shown again nor logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from calendars.connect import (
    ConnectError,
    check_calendar_cap,
    refetch_in_full,
    store_for_first_fetch,
)
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from core.config import NudgeConfig
from core.ids import owned
from providers import crypto
from providers.base import ProviderError
from providers.ics import feed_host
from providers.untrusted_fetch import parse_target, vetted_address
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars")

NAME = Provider.CALDAV.value


@dataclass(frozen=True)
class Preset:
    """A known CalDAV service: where its server is, and where its app passwords are made."""

    key: str
    label: str
    server_url: str  # empty: the person gives their server's address
    password_help: object


PRESETS = {
    p.key: p
    for p in (
        Preset(
            "icloud",
            "iCloud",
            "https://caldav.icloud.com/",
            _(
                "Make an app-specific password at account.apple.com: Apple ID → Sign-In "
                "and Security → App-Specific Passwords. Your Apple ID password will not work."
            ),
        ),
        Preset(
            "fastmail",
            "Fastmail",
            "https://caldav.fastmail.com/",
            _("Make an app password in Fastmail: Settings → Privacy & Security → App passwords."),
        ),
        Preset(
            "nextcloud",
            "Nextcloud",
            "",
            _(
                "Give your Nextcloud's address. Make an app password in Nextcloud: "
                "Settings → Security → Devices & sessions."
            ),
        ),
        Preset(
            "other",
            _("any CalDAV server"),
            "",
            _("Give the server's address; use an app password if your provider offers one."),
        ),
    )
}

REFUSED = _(
    "This server address cannot be used. Give the public https:// address of your calendar server."
)


def server_address(preset: str, given: str) -> str:
    """The address discovery starts from: the preset's, else the one given (a bare
    Nextcloud address gets its DAV path)."""
    chosen = PRESETS.get(preset) or PRESETS["other"]
    if chosen.server_url:
        return chosen.server_url
    url = given.strip()
    if url and "://" not in url:
        url = "https://" + url
    if chosen.key == "nextcloud" and "/remote.php/" not in url:
        url = url.rstrip("/") + "/remote.php/dav/"
    return url


def add_account(
    user_id: int,
    *,
    preset: str,
    server_url: str,
    username: str,
    password: str,
    config: NudgeConfig,
    allow_private: bool = False,
) -> CalendarConnection:
    """Store the account and ask for its discovery (by the minute job)."""
    url = server_address(preset, server_url)
    if not username.strip() or not password:
        raise ConnectError(gettext("Give the account's user name and its app password."))
    try:
        target = parse_target(url, NAME)
        if target.scheme != "https" and not allow_private:
            # The password travels in every request: never in clear over the internet.
            raise ProviderError("caldav: a password is sent only over https")
        vetted_address(target, allow_private=allow_private, label=NAME)
    except ProviderError as exc:
        reason = crypto.scrub(str(exc), password)
        logger.info("refused a CalDAV address", extra={"user_id": user_id, "reason": reason})
        raise ConnectError(gettext(REFUSED)) from None
    return store_for_first_fetch(
        user_id,
        config,
        provider=Provider.CALDAV,
        account=username.strip()[:255],
        access_token_encrypted=crypto.encrypt(password),
        feed_url_encrypted=crypto.encrypt(url),
        allow_private_network=allow_private,
    )


def choices_of(connection: CalendarConnection) -> list[dict[str, str]]:
    """The calendars discovery found for an account not yet narrowed to one."""
    if connection.provider != Provider.CALDAV or connection.calendar_id:
        return []
    found = (connection.sync_state or {}).get("calendars") or []
    return [c for c in found if isinstance(c, dict) and c.get("url")]


def choose_calendars(
    user_id: int, connection_id: int, urls: list[str], *, config: NudgeConfig
) -> list[CalendarConnection] | None:
    """Use the chosen calendars of a discovered account; None if it is not the user's
    or not waiting for a choice. Addresses discovery did not find are ignored."""
    now = timezone.now()
    with tenant_scope(user_id):
        account = owned(CalendarConnection.objects, user_id, connection_id).first()
        if account is None or not choices_of(account):
            return None
        names = {c["url"]: str(c.get("name", ""))[:255] for c in choices_of(account)}
        chosen = [url for url in dict.fromkeys(urls) if url in names]
        if not chosen:
            raise ConnectError(gettext("Choose at least one calendar."))
        if len(chosen) > 1:  # the account's own row holds the first
            check_calendar_cap(user_id, config.max_calendars_per_user, adding=len(chosen) - 1)
        rows = []
        for index, url in enumerate(chosen):
            row = account if index == 0 else CalendarConnection(user_id=user_id)
            row.provider, row.account = Provider.CALDAV, account.account
            row.calendar_id = _path_of(url)[:255]
            row.access_token_encrypted = account.access_token_encrypted
            row.feed_url_encrypted = crypto.encrypt(url)
            row.allow_private_network = account.allow_private_network
            row.sync_state, row.last_synced_at = {"name": names[url]}, None
            refetch_in_full(row, now)
            rows.append(row)
        return rows


def renew_password(user_id: int, connection_id: int, password: str) -> CalendarConnection | None:
    """A new app password for a CalDAV calendar (and every calendar of the same account
    and server): active again, and re-read in full. None if it is not the user's."""
    if not password:
        return None
    with tenant_scope(user_id):
        caldav = CalendarConnection.objects.filter(provider=Provider.CALDAV)
        found = owned(caldav, user_id, connection_id).first()
        if found is None:
            return None
        host = feed_host(crypto.decrypt(found.feed_url_encrypted))
        now = timezone.now()
        for row in CalendarConnection.objects.filter(
            user_id=user_id, provider=Provider.CALDAV, account=found.account
        ):
            if feed_host(crypto.decrypt(row.feed_url_encrypted)) != host:
                continue
            row.access_token_encrypted = crypto.encrypt(password)
            row.status, row.last_error, row.retry_after = ConnectionStatus.ACTIVE, "", None
            refetch_in_full(row, now)
            found = row if row.pk == found.pk else found
        return found


def _path_of(url: str) -> str:
    try:
        return parse_target(url, NAME).request_uri
    except ProviderError:
        return url
