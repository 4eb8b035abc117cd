"""manage.py connect_ics <user_id> <url> — connect an ICS feed (logic in calendars.connect)."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser

from calendars.connect import ConnectError, connect_ics_feed
from core.command_line import NudgeCommand, instant, positive_int, require_users
from core.config import NudgeConfig


class Command(NudgeCommand):
    help = "Connect an ICS feed address to a user: validated, fetched once, stored encrypted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("user_id", type=positive_int)
        parser.add_argument(
            "url", help="The feed's secret address (https://, http:// or webcal://)."
        )
        parser.add_argument(
            "--allow-private",
            action="store_true",
            help="Allow a host on a private or loopback network (development, intranets).",
        )
        parser.add_argument(
            "--now", type=instant, default=None, help="Expand the feed as of this ISO-8601 instant."
        )

    def handle(self, *args, user_id: int, url: str, allow_private: bool, now, **options) -> None:
        require_users([user_id], active=False)
        try:
            connection = connect_ics_feed(
                user_id,
                url,
                config=NudgeConfig.from_settings(),
                allow_private=allow_private,
                now=now,
            )
        except ConnectError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Connected ICS feed {connection.account!r} as connection {connection.pk} "
            f"for user {user_id}."
        )
