"""manage.py prune_sends --older-than DAYS — retention for settled rows."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduled_sends.claim import database_now, prune_settled


class Command(BaseCommand):
    help = "Delete settled (sent, skipped, failed, expired) rows older than DAYS, in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=int, required=True, metavar="DAYS")
        parser.add_argument("--batch-size", type=int, default=5000)

    def handle(self, *args, older_than: int, batch_size: int, **options) -> None:
        if older_than < 1:
            raise CommandError("--older-than must be at least 1 day: support reads recent rows")
        if batch_size < 1:
            raise CommandError("--batch-size must be positive")
        cutoff = database_now() - timedelta(days=older_than)
        deleted = prune_settled(
            cutoff, batch_size, progress=lambda n: self.stdout.write(f"  … {n} deleted")
        )
        self.stdout.write(
            f"prune_sends: deleted {deleted} settled rows fired before {cutoff:%Y-%m-%d %H:%M}Z"
        )
