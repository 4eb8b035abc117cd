"""manage.py sync_calendars, for operators and development: exits non-zero when any
connection failed."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from calendars.sync import SyncSummary
from calendars.sync_pool import sync_user_connections
from core.command_line import NudgeCommand, instant, positive_int, require_users
from core.config import NudgeConfig


class Command(NudgeCommand):
    help = "Sync connected calendars over the sweep's window; one line per connection."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", type=positive_int, help="Only this user's connections.")
        parser.add_argument(
            "--now", type=instant, help="Pretend it is this ISO-8601 instant (default: now)."
        )

    def handle(self, *args, user: int | None, now, **options) -> None:
        moment = now or timezone.now()
        config = NudgeConfig.from_settings()
        users = get_user_model().objects.filter(is_active=True).order_by("pk")
        if user is not None:
            require_users([user])
            users = users.filter(pk=user)
        total = SyncSummary()
        for user_id in users.values_list("pk", flat=True).iterator():
            summary = sync_user_connections(user_id, now=moment, config=config)
            for result in summary.results:
                self.stdout.write(f"user {user_id} {result}")
                total.add(result)
        self.stdout.write(
            f"{len(total.results)} connections: {total.synced} synced, {total.unchanged} "
            f"unchanged, {total.failed} failed, {total.needs_reauth} need re-authorisation, "
            f"{total.backing_off} backing off; {total.provider_calls} provider calls; events "
            f"+{total.events_created} ~{total.events_updated} -{total.events_deleted}"
        )
        newly_failed = [r for r in total.results if r.outcome in ("failed", "needs_reauth")]
        if newly_failed:
            raise CommandError(f"{len(newly_failed)} connection(s) failed to sync")
