from __future__ import annotations

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from core.command_line import NudgeCommand
from tenancy import embedded_server


class Command(NudgeCommand):
    help = "Say whether the embedded PostgreSQL (var/) runs, or stop it."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("status", "stop"))

    def handle(self, *args, action: str, **options) -> None:
        if not settings.EMBEDDED_DATABASE:
            raise CommandError("DATABASE_URL is set: there is no embedded PostgreSQL to manage")
        pgdata = embedded_server.data_dir(settings.STATE_DIR)
        if action == "status":
            running = embedded_server.running(pgdata)
            self.stdout.write(
                f"the embedded PostgreSQL is {'running' if running else 'not running'} ({pgdata})"
            )
            return
        try:
            self.stdout.write(embedded_server.stop(pgdata))
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
