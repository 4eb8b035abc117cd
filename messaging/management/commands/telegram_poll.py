"""manage.py telegram_poll — receive the bot's updates by long polling (development)."""

from __future__ import annotations

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from core.command_line import NudgeCommand
from core.config import NudgeConfig
from messaging.telegram.bot import BotClient, TelegramLinkError, poll_once, resume_offset


class Command(NudgeCommand):
    help = (
        "Answer /start, /stop and nudge buttons by long polling getUpdates "
        "(use the webhook in production)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="One getUpdates round, then exit.")
        parser.add_argument(
            "--timeout", type=int, default=30, help="Long-poll seconds per round (0-50)."
        )

    def handle(self, *args, **options) -> None:
        timeout = options["timeout"]
        if not 0 <= timeout <= 50:
            raise CommandError("--timeout must be between 0 and 50 seconds")
        try:
            client = BotClient(poll_timeout=timeout)
        except TelegramLinkError as exc:
            raise CommandError(str(exc)) from None
        config = NudgeConfig.from_settings()
        offset = resume_offset()
        try:
            while True:
                offset = poll_once(client, offset, timeout, timezone.now(), config)
                if options["once"]:
                    break
        except TelegramLinkError as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            pass
        finally:
            client.close()
        self.stdout.write(f"telegram_poll: next offset {offset}")
