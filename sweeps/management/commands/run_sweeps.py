"""manage.py run_sweeps — development only: the cron jobs on cron's cadence."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import CommandError

from core.command_line import NudgeCommand
from core.deployment import development
from sweeps.dev_loop import run_sweeps

REFUSAL = (
    "run_sweeps is for development only (DEBUG or the embedded database); "
    "a deployment runs materialize and deliver from cron (docs/OPERATIONS.md)"
)


class Command(NudgeCommand):
    help = (
        "Development: materialize every 15 minutes, deliver and sync_changed every minute, "
        "in this process, until Ctrl-C."
    )

    def handle(self, *args, **options) -> None:
        if not development():
            raise CommandError(REFUSAL)
        stop = threading.Event()

        def on_interrupt(signum, frame) -> None:
            if stop.is_set():
                raise KeyboardInterrupt  # a second Ctrl-C: stop now
            self.stdout.write("run_sweeps: stopping after the sweep in progress …")
            stop.set()

        previous = signal.signal(signal.SIGINT, on_interrupt)
        try:
            run_sweeps(stop, write=self.stdout.write)
        finally:
            signal.signal(signal.SIGINT, previous)
