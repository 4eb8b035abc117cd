"""manage.py connect_ics <user_id> <url> — connect an ICS feed (logic in calendars.connect)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from calendars.connect import ConnectError, connect_ics_feed


class Command(BaseCommand):
    help = "Connect an ICS feed address to a user: validated, fetched once, stored encrypted."

    def add_arguments(self, parser) -> None:
        parser.add_argument("user_id", type=int)
        parser.add_argument("url", help="The feed's secret address (http or https).")
        parser.add_argument(
            "--allow-private",
            action="store_true",
            help="Allow a host on a private or loopback network (development, intranets).",
        )

    def handle(self, *args, user_id: int, url: str, allow_private: bool, **options) -> None:
        try:
            connection = connect_ics_feed(user_id, url, allow_private=allow_private)
        except ConnectError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Connected ICS feed {connection.account!r} as connection {connection.pk} "
            f"for user {user_id}."
        )
