"""manage.py deliver — cron: every minute."""

from __future__ import annotations

from django.core.management.base import CommandParser

from core.command_line import positive_float, positive_int
from scheduled_sends.deliver import run_deliver
from scheduled_sends.management.sweep_command import SweepCommand


class Command(SweepCommand):
    help = "Claim due nudges in bounded batches and send them, exactly once."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--batch-size", type=positive_int, default=None, help="Rows per claim.")
        parser.add_argument(
            "--budget-seconds",
            type=positive_float,
            default=None,
            help="Stop claiming after this long.",
        )

    def handle(self, *args, now, batch_size, budget_seconds, **options) -> None:
        self.finish(run_deliver(now, batch_size=batch_size, budget_seconds=budget_seconds))
