"""manage.py prune_inbound --older-than DAYS — forget old inbound replay guards.

The Telegram update-id log only guards against a replayed update, and Telegram
keeps an unconfirmed update for at most a day; ids older than that can go
(the newest is kept: polling resumes after it). Run it beside ``prune_sends``.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand, positive_int
from messaging.telegram.bot import prune_updates_seen


class Command(NudgeCommand):
    help = "Forget inbound replay guards (Telegram update ids) older than DAYS."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=positive_int, required=True, metavar="DAYS")

    def handle(self, *args, older_than: int, **options) -> None:
        cutoff = timezone.now() - timedelta(days=older_than)
        updates = prune_updates_seen(cutoff)
        self.stdout.write(f"prune_inbound: forgot {updates} Telegram update ids seen before then")
