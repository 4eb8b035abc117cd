"""The minute job (``manage.py sync_changed``): act on what push said.

Its own cron line rather than a step of ``deliver``: delivery's minute is
spent claiming and sending what is due at the top of the minute, and a
provider fetch may take up to ``CALENDAR_HTTP_TIMEOUT_SECONDS`` — a slow
Google must never make a nudge late. Apart, each can fail, be timed and be
scaled on its own.

Each run (1) creates or renews the channels that are due, then (2) fetches
every connection notified since the last run, once however many
notifications came, and re-materializes its user, so a cancelled meeting's
nudge is withdrawn (or a moved one's moved) within a minute of the provider
saying so. With push not configured it does nothing.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from calendars.push import channels, worklist
from calendars.sync import ConnectionResult, sync_connection
from core.config import NudgeConfig
from scheduled_sends.materialize import materialize_user

logger = logging.getLogger("nudge.calendars.push")


@dataclass
class MinuteReport:
    push_configured: bool = True
    channels: Counter[str] = field(default_factory=Counter)
    connections: Counter[str] = field(default_factory=Counter)
    users: int = 0
    queued: int = 0
    removed: int = 0
    failed_users: int = 0

    def summary(self) -> str:
        if not self.push_configured:
            return "sync_changed: push is not configured (CALENDAR_PUSH_BASE_URL); nothing to do"
        channels_ = ", ".join(f"{k} {v}" for k, v in sorted(self.channels.items())) or "none due"
        synced = ", ".join(f"{k} {v}" for k, v in sorted(self.connections.items())) or "none"
        return (
            f"sync_changed: channels: {channels_}; changed connections: {synced}; "
            f"users {self.users}, queued {self.queued}, removed {self.removed}, "
            f"failed users {self.failed_users}"
        )


def run_sync_changed(now: datetime) -> MinuteReport:
    config = NudgeConfig.from_settings()
    report = MinuteReport(push_configured=bool(config.calendar_push_base_url))
    if not report.push_configured:
        return report
    for work in worklist.take_maintenance(now):
        try:
            report.channels[channels.maintain(work.user_id, work.connection_id, now, config)] += 1
        except Exception:
            logger.exception("push channel maintenance failed for %s", work.connection_id)
            report.channels["error"] += 1
    changed: dict[int, list[int]] = defaultdict(list)
    for work in worklist.take_changed():
        changed[work.user_id].append(work.connection_id)
    window_start, window_end = config.subject_window(now)
    for user_id, connection_ids in changed.items():
        report.users += 1
        try:
            for connection_id in connection_ids:
                result: ConnectionResult = sync_connection(
                    user_id,
                    connection_id,
                    now=now,
                    window_start=window_start,
                    window_end=window_end,
                    config=config,
                )
                report.connections[result.outcome] += 1
            user = materialize_user(user_id, now, config)
        except Exception:
            logger.exception("sync_changed failed for one user", extra={"user_id": user_id})
            report.failed_users += 1
            continue
        report.queued += user.queued
        report.removed += user.removed
    return report
