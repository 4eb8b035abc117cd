"""manage.py materialize — cron: every 15 minutes."""

from __future__ import annotations

from django.core.management.base import CommandParser

from core.command_line import positive_int, require_users
from sweeps.management.sweep_command import SweepCommand
from sweeps.materialize import run_materialize


class Command(SweepCommand):
    help = "Sync calendars and queue every nudge due within the look-ahead window."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--user",
            type=positive_int,
            action="append",
            dest="user_ids",
            help="Only this user (repeatable).",
        )
        parser.add_argument(
            "--no-sync", action="store_true", help="Materialize from local rows without syncing."
        )

    def handle(self, *args, now, user_ids, no_sync, verbosity, **options) -> None:
        def progress(report) -> None:
            if verbosity >= 1:
                self.stdout.write(f"  … {report.users} users, {report.queued} queued")

        user_ids = require_users(user_ids)
        report = run_materialize(
            now, user_ids=user_ids, progress=progress, sync_calendars=not no_sync
        )
        self.finish(report)
