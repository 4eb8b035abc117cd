"""manage.py deliver — cron: every minute."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from core.command_line import positive_float, positive_int
from core.config import NudgeConfig
from sweeps import deliver
from sweeps.management.sweep_command import SweepCommand


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
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Say what a run (at --now, or now) would send; claim and send nothing.",
        )
        parser.add_argument(
            "--simulated-clock",
            action="store_true",
            help="Accept a future --now: tests and load simulations that drive their own clock.",
        )

    def handle(
        self,
        *args,
        now,
        batch_size,
        budget_seconds,
        dry_run: bool,
        simulated_clock: bool,
        **options,
    ) -> None:
        if dry_run:
            for line in deliver.dry_run(NudgeConfig.from_settings(), now).lines():
                self.stdout.write(line)
            return
        if not simulated_clock:
            try:
                deliver.refuse_future_instant(now)
            except deliver.FutureInstantRefused as exc:
                raise CommandError(str(exc)) from exc
        self.finish(deliver.run_deliver(now, batch_size=batch_size, budget_seconds=budget_seconds))
