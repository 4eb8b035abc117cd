"""manage.py prune_sends: retention; whole day partitions are dropped as the owner role."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandParser
from django.db import OperationalError

from core.command_line import NudgeCommand, days_up_to, positive_int
from scheduled_sends.queue.partitions import drop_aged_partitions
from scheduled_sends.queue.transitions import database_now, prune_settled
from scheduled_sends.runlog import prune_run_log


class Command(NudgeCommand):
    help = (
        "Drop day partitions, then delete settled (sent, skipped, failed, expired) rows, "
        "older than DAYS, and the sweeps' run-log entries of before then."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=days_up_to(36_500),
            required=True,
            metavar="DAYS",
            help="At least 1: support reads recent rows.",
        )
        parser.add_argument("--batch-size", type=positive_int, default=5000)

    def handle(self, *args, older_than: int, batch_size: int, **options) -> None:
        cutoff = database_now() - timedelta(days=older_than)
        try:
            dropped = drop_aged_partitions(
                cutoff,
                progress=lambda d: self.stdout.write(f"  … dropped {d.name} (~{d.rows} rows)"),
            )
        except OperationalError as exc:
            self.stderr.write(
                f"could not connect as the owner role to drop aged partitions ({exc}); "
                "their settled rows are deleted in batches instead"
            )
            dropped = []
        deleted = prune_settled(
            cutoff, batch_size, progress=lambda n: self.stdout.write(f"  … {n} deleted")
        )
        runs = prune_run_log(cutoff, batch_size)
        self.stdout.write(
            f"prune_sends: deleted {deleted} settled rows fired before {cutoff:%Y-%m-%d %H:%M}Z; "
            f"dropped {len(dropped)} day partitions; deleted {runs} run-log entries"
        )
