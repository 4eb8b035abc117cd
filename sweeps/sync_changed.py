"""The minute job (``manage.py sync_changed``): the one place work after a change is done.

Two kinds of change ask for a fetch, and both leave a mark in the work list
(``calendars.push.worklist``) in the transaction that made them: a provider
saying a calendar changed (push), and a person adding or reconnecting a
calendar (``worklist.request_fetch``). No web request fetches anything; this
job does, within a minute.

Its own cron line rather than a step of ``deliver``: delivery's minute is
spent claiming and sending what is due at the top of the minute, and a
provider fetch may take up to ``CALENDAR_HTTP_TIMEOUT_SECONDS`` — a slow
Google must never make a nudge late. Apart, each can fail, be timed and be
scaled on its own.

Each run (1) creates or renews the channels that are due, then (2) fetches
every connection notified since the last run (or found lapsed by step 1),
once however many notifications came, and re-materializes its user, so a
cancelled meeting's nudge is withdrawn (or a moved one's moved) within a
minute of the provider saying so, and (3) undoes the calendars people
disconnected at their provider (``sweeps/release.py``). With push not
configured it skips step 1 and still does the rest.

The fetches go through the materialize sweep's ``SyncPool``, so the same
bounds hold: ``CALENDAR_SYNC_CONCURRENCY`` at once, ``CALENDAR_SYNC_PER_HOST``,
one user's connections one after another within their
``CALENDAR_SYNC_USER_BUDGET_SECONDS``, the shared provider pacing, and each
read and write in the owner's tenant scope. Only the connections that were
notified are fetched, not the user's others.

The run starts no new work :data:`RUN_BUDGET_SECONDS` after it began (fetches
and channel calls already out finish), well inside the minute and the cron
line's ``timeout``; channels get at most half of it (:data:`CHANNELS_SHARE`),
and those not reached are due again at once.

The changes it takes are held, not cleared (``calendars.push.worklist``): a
change is cleared only once its connection was fetched (or needs nothing
fetched) and its user re-queued; one not fetched before the deadline is put
back as it was, and one whose fetch must back off is held until the back-off
ends — so a later minute job fetches it, not the 15-minute cycle. A run that
fails with an exception puts its unfinished changes back the same way. A run
that is killed cannot (the cron line's ``timeout`` sends SIGTERM, which
Python does not turn into an exception; SIGKILL; a machine lost): its
unfinished changes stay held until ``worklist.CHANGE_LEASE`` (5 minutes) runs
out and are then taken by the next minute job, and their connections keep
``resync_requested``, so the 15-minute sweep fetches them too. A kill delays
a change by up to the lease; it never drops it.

Each user's connections are re-queued as soon as their fetches are in, on
the run's thread, between dispatching more fetches.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from calendars.push import channels, worklist
from calendars.sync import ConnectionResult, Outcome, SyncSummary
from calendars.sync_pool import Finished, SyncPool
from core.config import NudgeConfig
from sweeps.release import ReleaseReport, release_due
from sweeps.replan import materialize_user

logger = logging.getLogger("nudge.calendars.push")

# The run starts no new fetch or channel call after this many seconds: what is
# out then finishes (each fetch within CALENDAR_SYNC_BUDGET_SECONDS), and the
# next minute's run starts on time with what this one left.
RUN_BUDGET_SECONDS = 45.0
# Channels are worked on for at most this share of it, so a backlog of channels
# (every calendar enrolled at once) cannot leave the changes no time; a channel
# is renewed half a day before it runs out, a change may be minutes from a nudge.
CHANNELS_SHARE = 0.5


@dataclass
class MinuteReport:
    push_configured: bool = True
    channels: Counter[str] = field(default_factory=Counter)
    connections: Counter[str] = field(default_factory=Counter)
    users: int = 0
    queued: int = 0
    removed: int = 0
    failed_users: int = 0
    # Changed connections taken but still marked when the run ended (not fetched
    # before the deadline, or their provider must wait): a later minute job's.
    left_marked: int = 0
    # Disconnected calendars undone at their provider (``calendars/release.py``).
    released: ReleaseReport = field(default_factory=ReleaseReport)

    def summary(self) -> str:
        channels_ = ", ".join(f"{k} {v}" for k, v in sorted(self.channels.items())) or "none due"
        if not self.push_configured:
            channels_ = "none (push is not configured: PUBLIC_BASE_URL)"
        synced = ", ".join(f"{k} {v}" for k, v in sorted(self.connections.items())) or "none"
        return (
            f"sync_changed: channels: {channels_}; changed connections: {synced}; "
            f"users {self.users}, queued {self.queued}, removed {self.removed}, "
            f"failed users {self.failed_users}, left marked {self.left_marked}; "
            f"disconnected calendars released {self.released.released} "
            f"(grants revoked {self.released.revoked}, not confirmed {self.released.failed})"
        )


def run_sync_changed(now: datetime, *, budget_seconds: float = RUN_BUDGET_SECONDS) -> MinuteReport:
    config = NudgeConfig.from_settings()
    report = MinuteReport(push_configured=bool(config.calendar_push_base_url))
    started = time.monotonic()
    deadline = started + budget_seconds
    if report.push_configured:
        # Channels first: a lapsed one found there is marked changed, and fetched below.
        _maintain_channels(now, config, started + CHANNELS_SHARE * budget_seconds, report)
    _ChangedRun(now, config, deadline, report).run()
    report.released = release_due(now, config)
    return report


def _maintain_channels(
    now: datetime, config: NudgeConfig, deadline: float, report: MinuteReport
) -> None:
    """Create or renew the due channels until the deadline; those not reached are
    due again at once, for the next minute job."""
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


class _ChangedRun:
    """One run's changed connections: taken (held), fetched through a ``SyncPool``,
    each user re-queued as their fetches finish, and every hold settled at the
    end, whatever happened."""

    def __init__(
        self, now: datetime, config: NudgeConfig, deadline: float, report: MinuteReport
    ) -> None:
        self.now, self.config, self.deadline, self.report = now, config, deadline, report
        self.taken: list[worklist.Work] = []
        # How the taken changes are left: cleared (done), held until a back-off
        # ends (due), or else put back as they were, for the next run.
        self.done: set[int] = set()
        self.due: dict[int, datetime] = {}

    def run(self) -> None:
        if time.monotonic() >= self.deadline:
            return  # the marks wait for the next run, untouched
        try:
            self.taken = worklist.take_changed()
            if self.taken:
                self._sync()
        finally:
            worklist.settle_changed(self.taken, done=self.done, due=self.due)
            self.report.left_marked = len(self.taken) - len(self.done)

    def _sync(self) -> None:
        by_user: defaultdict[int, list[int]] = defaultdict(list)
        for work in self.taken:
            by_user[work.user_id].append(work.connection_id)
        window_start, window_end = self.config.subject_window(self.now)
        with SyncPool(
            now=self.now,
            window_start=window_start,
            window_end=window_end,
            config=self.config,
            deadline=self.deadline,
        ) as pool:
            for user_id, connection_ids in by_user.items():
                if time.monotonic() >= self.deadline:
                    break  # the rest keep their marks
                self._requeue(pool, pool.admit(user_id, connection_ids))
            self._requeue(pool, pool.drain())

    def _requeue(self, pool: SyncPool, done: list[Finished]) -> None:
        """Re-queue each finished user, letting the pool start more fetches between them."""
        while done:
            self._user_done(*done.pop(0))
            done += pool.finished()

    def _user_done(self, user_id: int, summary: SyncSummary) -> None:
        self.report.users += 1
        if summary.unreadable is not None:
            logger.error(
                "sync_changed could not read a user's connections (%s)",
                type(summary.unreadable).__name__,
                extra={"user_id": user_id},
            )
            self.report.failed_users += 1
            return
        for result in summary.results:
            self.report.connections[result.outcome] += 1
        if all(result.outcome == Outcome.DEFERRED for result in summary.results):
            return  # nothing fetched: nothing to re-queue yet
        try:
            planned = materialize_user(user_id, self.now, self.config)
        except Exception:
            logger.exception("sync_changed failed for one user", extra={"user_id": user_id})
            self.report.failed_users += 1
            return  # marks put back: the next run re-queues them (the copy is stored)
        self.report.queued += planned.queued
        self.report.removed += planned.removed
        for result in summary.results:
            self._settle(result)

    def _settle(self, result: ConnectionResult) -> None:
        """How a connection's change is left once its user is re-queued: put back if
        it was not fetched; held until the back-off ends if the provider must wait;
        else done (synced, unchanged, gone, or waiting for the user to reconnect)."""
        if result.outcome == Outcome.DEFERRED:
            return
        if result.outcome in (Outcome.FAILED, Outcome.BACKING_OFF) and result.retry_after:
            self.due[result.connection_id] = result.retry_after
            return
        self.done.add(result.connection_id)
