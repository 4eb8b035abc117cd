"""What the sweep commands share: ``--now``, the summary line, the exit code."""

from __future__ import annotations

import sys

from django.core.management.base import CommandParser

from core.command_line import NudgeCommand, instant


class SweepCommand(NudgeCommand):
    """A command that runs one sweep, prints a one-line summary and exits
    non-zero when the run failed, so cron mails someone."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--now",
            type=instant,
            default=None,
            help="Act as of this ISO-8601 instant (replays, tests). Default: the database clock.",
        )

    def finish(self, report) -> None:
        if report.ok:
            self.stdout.write(report.summary())
            return
        self.stderr.write(report.summary())
        sys.exit(1)
