"""The calendars page's actions beyond the OAuth views: list, find, and switch or disconnect
(then re-plan the user, after the scope closes). Nothing here calls a provider."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from calendars.models import CalendarConnection, ConnectionStatus, Provider
from calendars.push import worklist
from calendars.release import request_release
from core.ids import owned
from sweeps.replan import refresh_queue
from tenancy.scope import tenant_scope


def checking(connections: list[CalendarConnection]) -> set[int]:
    """The connections whose first fetch has not finished: "checking…" on the page
    (the minute job fetches them, ``calendars.push.worklist.request_fetch``)."""
    return {
        item.pk
        for item in connections
        if item.last_synced_at is None
        and item.status == ConnectionStatus.ACTIVE
        and item.provider in (Provider.ICS, Provider.CALDAV)
    }


def unreadable(connections: list[CalendarConnection]) -> set[int]:
    """The addresses whose first fetch failed for good: "check the address and add it
    again". Not one a busy server made wait (it is fetched again), nor an OAuth calendar."""
    return {
        item.pk
        for item in connections
        if item.last_synced_at is None
        and item.status == ConnectionStatus.ERROR
        and item.retry_after is None
        and item.provider in (Provider.ICS, Provider.CALDAV)
    }


def list_connections(user_id: int) -> list[CalendarConnection]:
    """Every calendar whose events the person may be nudged for, the local one (the
    demo's events) included: it can be switched off, though not disconnected."""
    with tenant_scope(user_id):
        return list(CalendarConnection.objects.filter(user_id=user_id).order_by("created_at"))


def set_switches(
    user_id: int, connection_id: int, *, nudges_on: bool, skip_all_day: bool, now: datetime
) -> CalendarConnection | None:
    """Save one calendar's two switches and re-plan; None if it is not the user's."""
    with tenant_scope(user_id):
        connection = owned(CalendarConnection.objects, user_id, connection_id).first()
        if connection is None:
            return None
        connection.nudges_on, connection.skip_all_day = nudges_on, skip_all_day
        connection.save(update_fields=["nudges_on", "skip_all_day"])
    refresh_queue(user_id, now)
    return connection


def _removable(user_id: int, connection_id: int) -> QuerySet[CalendarConnection]:
    """The user's connection of that id, never the internal local one. Inside the scope."""
    return owned(CalendarConnection.objects, user_id, connection_id).exclude(
        provider=Provider.LOCAL
    )


def find(user_id: int, connection_id: int) -> CalendarConnection | None:
    """The connection the page asks about before disconnecting it."""
    with tenant_scope(user_id):
        return _removable(user_id, connection_id).first()


def disconnect(user_id: int, connection_id: int, now: datetime) -> str | None:
    """Delete the user's connection and say what became of its access; None if it is not
    theirs. What the provider still holds (a push channel, Google's grant) is undone by the
    minute job (``calendars/release.py``)."""
    with tenant_scope(user_id):
        connection = _removable(user_id, connection_id).first()
        if connection is None:
            return None
        provider = connection.provider
        request_release(connection, now)
        worklist.forget(connection_id)
        connection.delete()
    refresh_queue(user_id, now)
    if provider == Provider.GOOGLE:
        return _("Google's access is revoked within a minute")
    if provider == Provider.MICROSOFT:
        return _("its tokens are deleted (Microsoft offers no revocation)")
    return _("its feed address is deleted")
