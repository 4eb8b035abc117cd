"""manage.py nudge_health — exits non-zero when the queue needs a human."""

from __future__ import annotations

import json
import sys

from django.core.management.base import CommandParser

from scheduled_sends.health import check_health
from scheduled_sends.management.sweep_command import SweepCommand


class Command(SweepCommand):
    help = "Report the queue's health; exit 1 when something is wrong (for monitors and cron)."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, now, json: bool = False, **options) -> None:
        report = check_health(now)
        if json:
            self.stdout.write(_dumps(report.as_dict()))
        else:
            for check in report.checks:
                mark = "ok  " if check.ok else "FAIL"
                self.stdout.write(f"{mark} {check.name}: {check.detail}")
            figures = ", ".join(f"{k}={v}" for k, v in report.as_dict()["figures"].items())
            self.stdout.write(f"figures: {figures}")
            self.stdout.write("healthy" if report.ok else "UNHEALTHY")
        if not report.ok:
            sys.exit(1)


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, default=str)
