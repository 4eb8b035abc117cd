"""manage.py make_partitions: as the owner role, daily, on a cron line of its own."""

from __future__ import annotations

from django.core.management.base import CommandParser

from core.command_line import NudgeCommand, days_up_to
from scheduled_sends.queue.partitions import covered_until, make_partitions
from scheduled_sends.queue.transitions import database_now


class Command(NudgeCommand):
    help = "Create the queue's missing day partitions from today through DAYS ahead (owner role)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--days-ahead",
            type=days_up_to(366),
            default=14,
            metavar="DAYS",
            help="How many days past today to cover (default 14: two weeks of missed cron runs).",
        )

    def handle(self, *args, days_ahead: int, **options) -> None:
        now = database_now()
        made = make_partitions(now.date(), days_ahead)
        reach = covered_until(now)
        self.stdout.write(
            f"make_partitions: made {len(made)} ({', '.join(made) or 'none needed'}); "
            f"the queue is partitioned through {reach:%Y-%m-%d %H:%M}Z"
        )
