"""manage.py prune_inbound --older-than DAYS — forget old Telegram update ids, then
announce ``messaging.signals.prune_due`` so the floors above prune what they keep."""

from __future__ import annotations

from datetime import timedelta

from django.core.management.base import CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand, days_up_to
from messaging.signals import prune_due
from messaging.telegram.bot import prune_updates_seen


class Command(NudgeCommand):
    help = (
        "Forget inbound replay guards (Telegram update ids) older than DAYS; then what "
        "the end-user area keeps past its own retention (revoked API tokens)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=days_up_to(36_500), required=True, metavar="DAYS")

    def handle(self, *args, older_than: int, **options) -> None:
        now = timezone.now()
        updates = prune_updates_seen(now - timedelta(days=older_than))
        self.stdout.write(f"prune_inbound: forgot {updates} Telegram update ids seen before then")
        for _receiver, (what, count) in prune_due.send(sender=self.__class__, now=now):
            self.stdout.write(f"prune_inbound: deleted {count} {what}")
