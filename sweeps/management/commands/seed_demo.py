"""manage.py seed_demo — demo users, settings, events and follow-ups."""

from __future__ import annotations

import argparse
import secrets

from django.core.management.base import CommandParser
from django.utils import timezone

from accounts.models import Channel
from core.command_line import NudgeCommand, instant, non_negative_int
from core.config import NudgeConfig
from core.deployment import development
from sweeps.demo import seed_demo


def demo_password(value: str) -> str:
    """At least 8 characters; refused like any bad argument (exit 2), never echoed."""
    if len(value) < 8:
        raise argparse.ArgumentTypeError("must be at least 8 characters")
    return value


class Command(NudgeCommand):
    help = "Create demo users with delivery settings, events and follow-ups over the look-ahead."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--users", type=non_negative_int, default=3)
        parser.add_argument("--events-per-user", type=non_negative_int, default=4)
        parser.add_argument("--follow-ups-per-user", type=non_negative_int, default=1)
        parser.add_argument("--channel", choices=Channel.values, default=Channel.CONSOLE)
        parser.add_argument(
            "--start",
            type=instant,
            default=None,
            help="Spread subjects over the look-ahead from this ISO-8601 instant (default: now).",
        )
        parser.add_argument("--prefix", default="demo", help="Username prefix.")
        parser.add_argument(
            "--password",
            type=demo_password,
            default=None,
            help="Password for the new demo users (development: a random one is printed).",
        )
        parser.add_argument(
            "--due-now",
            type=non_negative_int,
            default=0,
            help="Follow-ups per user due one default lead from now, so a nudge is due at once.",
        )

    def handle(self, *args, **options) -> None:
        start = options["start"] or timezone.now()
        password = options["password"]
        if password is None and development():
            password = secrets.token_urlsafe(9)
        config = NudgeConfig.from_settings()
        users = seed_demo(
            users=options["users"],
            events_per_user=options["events_per_user"],
            follow_ups_per_user=options["follow_ups_per_user"],
            channel=options["channel"],
            start=start,
            window=config.lookahead,
            default_lead=config.default_lead,
            username_prefix=options["prefix"],
            due_now=options["due_now"],
            password=password,
            progress=lambda done: self.stdout.write(f"  … {done} users"),
        )
        follow_ups = users * (options["follow_ups_per_user"] + options["due_now"])
        self.stdout.write(
            f"seed_demo: {users} new users, {users * options['events_per_user']} events, "
            f"{follow_ups} follow-ups from {start:%Y-%m-%d %H:%M}Z"
        )
        if password is not None and users:
            self.stdout.write(
                f"seed_demo: new users sign in at /accounts/login/ as "
                f"{options['prefix']}1… with the password {password}"
            )
