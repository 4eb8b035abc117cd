"""manage.py telegram_poll — receive the bot's updates by long polling (development)."""

from __future__ import annotations

import argparse

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand, non_negative_int
from core.config import NudgeConfig
from messaging.channels.base import SendError
from messaging.telegram.bot import poll_once, resume_offset
from messaging.telegram.send import MAX_LONG_POLL_SECONDS, TelegramChannel


def long_poll_seconds(value: str) -> int:
    """0 to Telegram's longest long poll; refused like any bad argument (exit 2)."""
    seconds = non_negative_int(value)
    if seconds > MAX_LONG_POLL_SECONDS:
        raise argparse.ArgumentTypeError(f"{value!r} must be at most {MAX_LONG_POLL_SECONDS}")
    return seconds


class Command(NudgeCommand):
    help = (
        "Answer /start, /stop and nudge buttons by long polling getUpdates "
        "(use the webhook in production)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="One getUpdates round, then exit.")
        parser.add_argument(
            "--timeout",
            type=long_poll_seconds,
            default=30,
            help=f"Long-poll seconds per round (0-{MAX_LONG_POLL_SECONDS}).",
        )

    def handle(self, *args, **options) -> None:
        timeout = options["timeout"]
        channel = TelegramChannel()
        config = NudgeConfig.from_settings()
        offset = resume_offset()
        try:
            while True:
                offset = poll_once(channel, offset, timeout, timezone.now(), config)
                if options["once"]:
                    break
        except SendError as exc:
            raise CommandError(f"Telegram: {exc}") from None
        except KeyboardInterrupt:
            pass
        finally:
            channel.close()
        self.stdout.write(f"telegram_poll: next offset {offset}")
