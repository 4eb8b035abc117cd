"""manage.py prune_inbound — announce ``messaging.signals.prune_due`` so the floors
above prune what they keep past its own retention (replay guards prune themselves)."""

from __future__ import annotations

from django.core.management.base import CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand, positive_int
from messaging.signals import prune_due


class Command(NudgeCommand):
    help = "Delete what the end-user area keeps past its own retention (revoked API tokens)."

    def add_arguments(self, parser: CommandParser) -> None:
        # Accepted for existing cron lines: each kind of row has its own retention.
        parser.add_argument("--older-than", type=positive_int, metavar="DAYS")

    def handle(self, *args, **options) -> None:
        for _receiver, (what, count) in prune_due.send(sender=self.__class__, now=timezone.now()):
            self.stdout.write(f"prune_inbound: deleted {count} {what}")
