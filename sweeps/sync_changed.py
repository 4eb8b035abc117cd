"""The minute job (``manage.py sync_changed``): the one place work after a change is done.

Each run renews the due push channels, fetches every connection marked changed (a
push, a calendar added or reconnected) and re-queues its user, and undoes the
calendars people disconnected. A change is cleared only once fetched and re-queued;
one not reached is put back; a killed run's stay held until ``worklist.CHANGE_LEASE``.
Undoing a disconnected calendar at its provider (stop the push channel, revoke Google's
grant after: stopping needs it, delete the record) is best effort, tried once.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured

from calendars.models import CalendarConnection, Provider, ProviderRelease, ReleaseWork
from calendars.push import channels, worklist
from calendars.release import RELEASED_FIELDS, TAKE_LIMIT
from calendars.snapshot import snapshot_of
from calendars.sync import Outcome, SyncSummary
from core.config import NudgeConfig
from providers import crypto, google
from providers.base import ConnectionSnapshot
from scheduled_sends.queue.transitions import database_now
from sweeps.materialize import MaterializeReport, UserFlow
from sweeps.replan import UserResult
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.calendars.push")
release_logger = logging.getLogger("nudge.calendars.release")

# No new fetch or channel call starts after this; what is out finishes.
RUN_BUDGET_SECONDS = 45.0
# Channels get at most this share of it: a channel is renewed half a day before
# it runs out, a change may be minutes from a nudge.
CHANNELS_SHARE = 0.5


@dataclass
class MinuteReport:
    requeued: MaterializeReport  # the changed users, synced and planned (``UserFlow``)
    push_configured: bool = True
    channels: Counter[str] = field(default_factory=Counter)
    connections: Counter[str] = field(default_factory=Counter)
    left_marked: int = 0  # changes taken but left for a later run
    released: int = 0  # disconnected calendars' records done with
    revoked: int = 0  # Google grants revoked
    not_confirmed: int = 0  # a channel or grant the provider did not confirm (logged)

    @property
    def ok(self) -> bool:
        return self.requeued.failed_users == 0

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "channels": dict(self.channels),
            "connections": dict(self.connections),
            "requeued": self.requeued.as_dict(),
            "left_marked": self.left_marked,
            "released": self.released,
            "revoked": self.revoked,
            "not_confirmed": self.not_confirmed,
        }

    def summary(self) -> str:
        channels_ = ", ".join(f"{k} {v}" for k, v in sorted(self.channels.items())) or "none due"
        if not self.push_configured:
            channels_ = "none (push is not configured: PUBLIC_BASE_URL)"
        synced = ", ".join(f"{k} {v}" for k, v in sorted(self.connections.items())) or "none"
        users = self.requeued
        return (
            f"sync_changed: channels: {channels_}; changed connections: {synced}; "
            f"users {users.users}, queued {users.queued}, removed {users.removed}, "
            f"failed users {users.failed_users}, left marked {self.left_marked}; "
            f"disconnected calendars released {self.released} "
            f"(grants revoked {self.revoked}, not confirmed {self.not_confirmed})"
        )


def run_sync_changed(
    now: datetime | None = None, *, budget_seconds: float = RUN_BUDGET_SECONDS
) -> MinuteReport:
    """One minute job at ``now`` (default: the database clock)."""
    now = now or database_now()
    config = NudgeConfig.from_settings()
    report = MinuteReport(
        MaterializeReport(as_of=now), push_configured=bool(config.calendar_push_base_url)
    )
    started = time.monotonic()
    deadline = started + budget_seconds
    if report.push_configured:
        # Channels first: a lapsed one is marked changed, and fetched below.
        _maintain_channels(now, config, started + CHANNELS_SHARE * budget_seconds, report)
    _sync_changed(now, config, deadline, report)
    _release_due(now, config, report)
    return report


def _maintain_channels(
    now: datetime, config: NudgeConfig, deadline: float, report: MinuteReport
) -> None:
    """Create or renew the due channels until the deadline; the rest are due again at once."""
    if time.monotonic() >= deadline:
        return
    due = worklist.take_maintenance(now)
    for index, work in enumerate(due):
        if time.monotonic() >= deadline:
            worklist.release_maintenance(due[index:], now)
            report.channels["left for the next minute"] += len(due) - index
            return
        try:
            report.channels[channels.maintain(work.user_id, work.connection_id, now, config)] += 1
        except Exception:
            logger.exception("push channel maintenance failed for %s", work.connection_id)
            report.channels["error"] += 1


def _sync_changed(
    now: datetime, config: NudgeConfig, deadline: float, report: MinuteReport
) -> None:
    """Fetch the changed connections and re-queue their users (``UserFlow``). A taken change
    ends cleared (fetched and re-queued), held while the provider must wait (a back-off), or
    put back (all of a failed user's: the next run re-queues them from the stored copy)."""
    if time.monotonic() >= deadline:
        return  # the marks wait for the next run, untouched
    taken: list[worklist.Work] = []
    done: set[int] = set()
    due: dict[int, datetime] = {}

    def requeued(synced: SyncSummary, planned: UserResult | Exception | None) -> None:
        report.connections.update(result.outcome for result in synced.results)
        for result in synced.results if isinstance(planned, UserResult) else ():
            if result.outcome in (Outcome.FAILED, Outcome.BACKING_OFF) and result.retry_after:
                due[result.connection_id] = result.retry_after
            elif result.outcome != Outcome.DEFERRED:
                done.add(result.connection_id)

    try:
        taken = worklist.take_changed()
        by_user: defaultdict[int, list[int]] = defaultdict(list)
        for work in taken:
            by_user[work.user_id].append(work.connection_id)
        if not by_user:
            return
        with UserFlow(report.requeued, config, deadline=deadline, requeue=requeued) as flow:
            for user_id, connection_ids in by_user.items():
                if time.monotonic() >= deadline:
                    break  # the rest keep their marks
                flow.add(user_id, connection_ids=connection_ids)
            flow.finish()
    finally:
        worklist.settle_changed(taken, done=done, due=due)
        report.left_marked = len(taken) - len(done)


def _release_due(now: datetime, config: NudgeConfig, report: MinuteReport) -> None:
    """Undo every recorded release of a disconnected calendar that is due."""
    for connection_id, user_id in worklist.take_leased(ReleaseWork, "due_at", now, TAKE_LIMIT):
        with tenant_scope(user_id):
            release = ProviderRelease.objects.filter(connection_id=connection_id).first()
            snapshot = _snapshot(release, config) if release is not None else None
        if release is not None and snapshot is not None:
            _undo(release, snapshot, now, config, report)
        elif release is not None:
            report.not_confirmed += 1
        with tenant_scope(user_id):
            ProviderRelease.objects.filter(connection_id=connection_id).delete()
        ReleaseWork.objects.filter(connection_id=connection_id).delete()
        report.released += 1


def _snapshot(release: ProviderRelease, config: NudgeConfig) -> ConnectionSnapshot | None:
    """The provider's view of the deleted connection, secrets decrypted (owner's scope)."""
    kept = {name: getattr(release, name) for name in RELEASED_FIELDS}
    gone = CalendarConnection(pk=release.connection_id, **kept)
    try:
        return snapshot_of(gone, config)
    except (crypto.SecretDecryptionError, ImproperlyConfigured):
        release_logger.warning("a disconnected calendar's tokens could not be read; nothing undone")
        return None


def _undo(
    release: ProviderRelease,
    snapshot: ConnectionSnapshot,
    now: datetime,
    config: NudgeConfig,
    report: MinuteReport,
) -> None:
    if release.push_channel_id and not channels.stop(
        snapshot, release.push_channel_id, release.push_resource_id, now
    ):
        report.not_confirmed += 1
    if release.provider == Provider.GOOGLE and snapshot.refresh_token:
        if google.revoke_grant(snapshot.refresh_token, config.calendar_http_timeout_seconds):
            report.revoked += 1
        else:
            report.not_confirmed += 1
