"""What the sweep commands share: ``--now``, the summary line, the exit code."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime


def parse_instant(value: str) -> datetime:
    """An ISO-8601 instant with an explicit offset (a replay must not guess a zone)."""
    parsed = parse_datetime(value)
    if parsed is None:
        raise CommandError(f"--now: {value!r} is not an ISO-8601 date-time")
    if parsed.tzinfo is None:
        raise CommandError(f"--now: {value!r} has no UTC offset; add 'Z' or '+01:00'")
    return parsed


def positive_int(value: str) -> int:
    """A whole number of at least 1 (argparse type)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} must be at least 1")
    return number


class SweepCommand(BaseCommand):
    """A command that runs one sweep, prints a one-line summary and exits
    non-zero when the run failed, so cron mails someone."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--now",
            type=parse_instant,
            default=None,
            help="Act as of this ISO-8601 instant (replays, tests). Default: the database clock.",
        )

    def finish(self, report) -> None:
        if report.ok:
            self.stdout.write(report.summary())
            return
        self.stderr.write(report.summary())
        sys.exit(1)
