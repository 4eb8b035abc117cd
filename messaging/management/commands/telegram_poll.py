"""manage.py telegram_poll — receive the bot's updates by long polling (development)."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand
from core.config import NudgeConfig
from messaging.channels.base import SendError
from messaging.telegram.bot import poll_once, resume_offset
from messaging.telegram.send import MAX_LONG_POLL_SECONDS, TelegramChannel


class Command(NudgeCommand):
    help = (
        "Answer /start, /stop and nudge buttons by long polling getUpdates "
        "(use the webhook in production)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="One getUpdates round, then exit.")
        parser.add_argument(
            "--timeout",
            type=int,
            default=30,
            help=f"Long-poll seconds per round (0-{MAX_LONG_POLL_SECONDS}).",
        )

    def handle(self, *args, **options) -> None:
        timeout = options["timeout"]
        if not 0 <= timeout <= MAX_LONG_POLL_SECONDS:
            raise CommandError(f"--timeout must be between 0 and {MAX_LONG_POLL_SECONDS} seconds")
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
