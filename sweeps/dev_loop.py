"""``manage.py run_sweeps``: a development machine's cron jobs in one process (materialize
every 15 minutes, deliver and the minute job every minute); Ctrl-C stops between runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed

MATERIALIZE_EVERY = timedelta(minutes=15)
DELIVER_EVERY = timedelta(minutes=1)


@dataclass
class LoopSummary:
    materialize_runs: int = 0
    deliver_runs: int = 0

    def sentence(self) -> str:
        return (
            f"run_sweeps: stopped after {self.materialize_runs} materialize and "
            f"{self.deliver_runs} deliver runs"
        )


def run_sweeps(
    stop: threading.Event,
    *,
    write: Callable[[str], None],
    materialize: Callable = run_materialize,
    deliver: Callable = run_deliver,
    minute: Callable = run_sync_changed,
    clock: Callable[[], float] = time.monotonic,
    stamp: Callable[[], str] = lambda: time.strftime("%H:%M:%S"),
) -> LoopSummary:
    """Run the sweeps on cron's cadence until ``stop``; a failed one is reported, as cron would."""
    summary = LoopSummary()
    next_materialize = next_deliver = clock()
    write(
        f"run_sweeps: materialize every {MATERIALIZE_EVERY.seconds // 60} min, deliver every "
        f"minute; Ctrl-C stops after the sweep in progress"
    )
    while not stop.is_set():
        if clock() >= next_materialize:
            next_materialize = clock() + MATERIALIZE_EVERY.total_seconds()
            write(f"{stamp()} {_run('materialize', materialize)}")
            summary.materialize_runs += 1
        if stop.is_set():
            break
        if clock() >= next_deliver:
            next_deliver = clock() + DELIVER_EVERY.total_seconds()
            write(f"{stamp()} {_run('deliver', deliver)}")
            write(f"{stamp()} {_run('sync_changed', minute)}")
            summary.deliver_runs += 1
        stop.wait(max(0.0, min(next_materialize, next_deliver) - clock()))
    write(summary.sentence())
    return summary


def _run(name: str, sweep: Callable) -> str:
    """One sweep's summary line, or its exception's."""
    try:
        return sweep().summary()
    except Exception as exc:
        return f"{name} failed: {type(exc).__name__}: {exc}"
