"""manage.py sync_changed — the minute job (its own cron line); fails when a user's re-sync did."""

from __future__ import annotations

from django.core.management.base import CommandError

from core.command_line import NudgeCommand, instant
from scheduled_sends.queue.transitions import database_now
from sweeps.sync_changed import run_sync_changed


class Command(NudgeCommand):
    help = "Act on push notifications: renew channels, re-sync changed calendars, re-queue."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--now", type=instant, help="Pretend it is this ISO-8601 instant (default: now)."
        )

    def handle(self, *args, now, **options) -> None:
        report = run_sync_changed(now or database_now())
        self.stdout.write(report.summary())
        if report.failed_users:
            raise CommandError(f"{report.failed_users} user(s) could not be re-synced")
