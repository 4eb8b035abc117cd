"""manage.py write_message_table — regenerate docs/MESSAGES.md from the composer."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from messaging.message_table import over_limit, render


class Command(BaseCommand):
    help = "Write docs/MESSAGES.md: every nudge shape in every language, from the composer."
    requires_system_checks: list[str] = []

    def handle(self, *args, **options) -> None:
        problems = over_limit()
        if problems:
            self.stderr.write("over a channel's limit:\n  " + "\n  ".join(problems))
        path = Path(settings.BASE_DIR) / "docs" / "MESSAGES.md"
        path.write_text(render(), encoding="utf-8")
        self.stdout.write(f"write_message_table: wrote {path.name}")
