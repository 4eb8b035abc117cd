"""manage.py rotate_calendar_keys: run after prepending a new key to CALENDAR_TOKEN_KEYS;
once it reports no unreadable secrets (else it exits 1), the old key can be removed."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from calendars.key_rotation import rotate_calendar_secrets
from core.command_line import NudgeCommand


class Command(NudgeCommand):
    help = "Re-encrypt every stored calendar token and feed address under the newest key."

    def handle(self, *args, **options) -> None:
        try:
            report = rotate_calendar_secrets()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(report.summary())
        if report.unreadable:
            raise CommandError("some secrets are unreadable; keep the old keys until they are")
