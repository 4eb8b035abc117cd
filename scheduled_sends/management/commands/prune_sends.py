"""manage.py prune_sends --older-than DAYS — retention for settled rows."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandParser

from core.command_line import NudgeCommand, positive_int
from scheduled_sends.queue.transitions import database_now, prune_settled


class Command(NudgeCommand):
    help = "Delete settled (sent, skipped, failed, expired) rows older than DAYS, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=positive_int,
            required=True,
            metavar="DAYS",
            help="At least 1: support reads recent rows.",
        )
        parser.add_argument("--batch-size", type=positive_int, default=5000)

    def handle(self, *args, older_than: int, batch_size: int, **options) -> None:
        cutoff = database_now() - timedelta(days=older_than)
        deleted = prune_settled(
            cutoff, batch_size, progress=lambda n: self.stdout.write(f"  … {n} deleted")
        )
        self.stdout.write(
            f"prune_sends: deleted {deleted} settled rows fired before {cutoff:%Y-%m-%d %H:%M}Z"
        )
