"""manage.py deliver — cron: every minute."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from core.command_line import positive_float, positive_int
from core.config import NudgeConfig
from core.display import plural
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
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
            self.say_what_would_be_sent(now or transitions.database_now())
            return
        if now and not simulated_clock and now > (clock := transitions.database_now()):
            raise CommandError(
                f"--now {now.isoformat()} is in the future (the database clock says "
                f"{clock:%Y-%m-%dT%H:%M:%S}Z): a real deliver run would send those nudges "
                "early. Use --dry-run to see what would be sent, or --simulated-clock where "
                "the whole world runs on that clock (tests, load simulations)"
            )
        self.finish(run_deliver(now, batch_size=batch_size, budget_seconds=budget_seconds))

    def say_what_would_be_sent(self, as_of, limit: int = 50) -> None:
        """What a run at ``as_of`` would claim; nothing is claimed, sent or recorded."""
        total, rows = transitions.due_preview(as_of, NudgeConfig.from_settings(), limit)
        self.stdout.write(
            f"deliver --dry-run as of {as_of.isoformat()}: would claim "
            f"{plural(total, 'nudge')}; nothing was sent"
        )
        for row in rows:
            again = f" (attempt {row.attempts + 1})" if row.attempts else ""
            self.stdout.write(
                f"  #{row.id} user:{row.user_id} {row.kind} via {row.channel or 'their channel'}"
                f", due {row.fire_at:%Y-%m-%d %H:%M:%S}Z{again}"
            )
        if total > len(rows):
            self.stdout.write(f"  … and {total - len(rows)} more")
