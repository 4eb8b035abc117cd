"""manage.py nudge_health — exits non-zero when the queue needs a human."""

from __future__ import annotations

import json
import sys

from django.core.management.base import CommandParser

from console.health import check_health
from sweeps.management.sweep_command import SweepCommand

# The last line; the console's headline and /metrics' nudge_health_verdict say the same.
VERDICT_LINES = {
    "healthy": "healthy",
    "warning": "healthy, with {n} warning(s) to look at (WARN above)",
    "unhealthy": "UNHEALTHY",
}


class Command(SweepCommand):
    help = (
        "Report the queue's health; exit 1 when something needs a human now (for monitors "
        "and cron). Warnings (WARN) are printed but exit 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, now, **options) -> None:
        report = check_health(now)
        if options.get("json"):
            self.stdout.write(json.dumps(report.as_dict(), indent=2, default=str))
        else:
            for check in report.checks:
                mark = "FAIL" if not check.ok else "WARN" if check.warning else "ok  "
                self.stdout.write(f"{mark} {check.name}: {check.detail}")
            figures = ", ".join(f"{k}={v}" for k, v in report.as_dict()["figures"].items())
            self.stdout.write(f"figures: {figures}")
            self.stdout.write(VERDICT_LINES[report.verdict].format(n=len(report.warnings)))
        if not report.ok:
            sys.exit(1)
