"""manage.py telegram_webhook set|delete|info — manage the bot's webhook (set also
sets the command menu, per language)."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from core.command_line import NudgeCommand
from messaging.channels.base import SendError
from messaging.telegram.bot import ALLOWED_UPDATES, set_commands
from messaging.telegram.send import TelegramChannel

SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")  # Telegram's rule for secret_token


class Command(NudgeCommand):
    help = "Point Telegram at POST /telegram/webhook (set), stop it (delete), or show it (info)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["set", "delete", "info"])
        parser.add_argument(
            "--url",
            default="",
            help="Public https URL of /telegram/webhook (default: from PUBLIC_BASE_URL).",
        )

    def handle(self, *args, **options) -> None:
        action = options["action"]
        url = options["url"] or settings.TELEGRAM_WEBHOOK_URL
        secret = settings.TELEGRAM_WEBHOOK_SECRET
        if action == "set":
            if not url.startswith("https://"):
                raise CommandError("set needs an https:// URL (--url, or PUBLIC_BASE_URL set)")
            if not SECRET_TOKEN.fullmatch(secret or ""):
                raise CommandError(
                    "TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z a-z 0-9 _ - "
                    "(Telegram's rule for secret_token)"
                )
        channel = TelegramChannel()
        try:
            if action == "set":
                channel.call(
                    "setWebhook", url=url, secret_token=secret, allowed_updates=ALLOWED_UPDATES
                )
                menus = set_commands(channel)
                self.stdout.write(
                    f"telegram_webhook: set to {url}; command menu in {menus} languages"
                )
            elif action == "delete":
                channel.call("deleteWebhook")
                self.stdout.write("telegram_webhook: deleted (telegram_poll can be used now)")
            else:
                info = channel.call("getWebhookInfo")
                line = f"telegram_webhook: url {info.url or '(none)'}, "
                line += f"pending updates {info.pending_update_count}"
                if info.last_error_message:
                    line += f", last error: {info.last_error_message}"
                self.stdout.write(line)
        except SendError as exc:
            raise CommandError(f"Telegram: {exc}") from None
        finally:
            channel.close()
