"""manage.py sync_changed — the minute job (its own cron line); fails when a user's re-sync did."""

from __future__ import annotations

from sweeps.management.sweep_command import SweepCommand
from sweeps.sync_changed import run_sync_changed


class Command(SweepCommand):
    help = "Act on push notifications: renew channels, re-sync changed calendars, re-queue."

    def handle(self, *args, now, **options) -> None:
        self.finish(run_sync_changed(now))
