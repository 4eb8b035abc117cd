"""``manage.py run_sweeps``: a development machine's cron jobs in one process (materialize
every 15 minutes, deliver and the minute job every minute); Ctrl-C stops between runs.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.sync_changed import run_sync_changed

MATERIALIZE_EVERY = timedelta(minutes=15)
DELIVER_EVERY = timedelta(minutes=1)


def run_sweeps(stop: threading.Event, *, write: Callable[[str], None]) -> Counter[str]:
    """Run the sweeps on cron's cadence until ``stop``, a failed one reported as cron would;
    how many materialize and deliver runs there were."""
    runs: Counter[str] = Counter()
    next_materialize = next_deliver = time.monotonic()
    write(
        f"run_sweeps: materialize every {MATERIALIZE_EVERY.seconds // 60} min, deliver every "
        f"minute; Ctrl-C stops after the sweep in progress"
    )
    while not stop.is_set():
        if time.monotonic() >= next_materialize:
            next_materialize = time.monotonic() + MATERIALIZE_EVERY.total_seconds()
            write(_run("materialize", run_materialize))
            runs["materialize"] += 1
        if stop.is_set():
            break
        if time.monotonic() >= next_deliver:
            next_deliver = time.monotonic() + DELIVER_EVERY.total_seconds()
            write(_run("deliver", run_deliver))
            write(_run("sync_changed", run_sync_changed))
            runs["deliver"] += 1
        stop.wait(max(0.0, min(next_materialize, next_deliver) - time.monotonic()))
    write(
        f"run_sweeps: stopped after {runs['materialize']} materialize and "
        f"{runs['deliver']} deliver runs"
    )
    return runs


def _run(name: str, sweep: Callable) -> str:
    """One sweep's summary line, or its exception's, after the time of day it started."""
    started = time.strftime("%H:%M:%S")
    try:
        said = sweep().summary()
    except Exception as exc:
        said = f"{name} failed: {type(exc).__name__}: {exc}"
    return f"{started} {said}"
