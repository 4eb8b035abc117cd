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


def run_sweeps(stop: threading.Event, *, write: Callable[[str], None]) -> Counter[str]:
    """Run the sweeps on cron's cadence until ``stop``, a failed one reported as cron would;
    how many runs of each there were."""
    # Each sweep and its cron line's cadence, in the order a minute runs them.
    cron = {
        "materialize": (run_materialize, timedelta(minutes=15)),
        "deliver": (run_deliver, timedelta(minutes=1)),
        "sync_changed": (run_sync_changed, timedelta(minutes=1)),
    }
    runs: Counter[str] = Counter()
    next_run = dict.fromkeys(cron, time.monotonic())
    write(
        f"run_sweeps: materialize every {cron['materialize'][1].seconds // 60} min, deliver "
        "and sync_changed every minute; Ctrl-C stops after the sweep in progress"
    )
    while not stop.is_set():
        for name, (sweep, every) in cron.items():
            if stop.is_set() or time.monotonic() < next_run[name]:
                continue
            next_run[name] = time.monotonic() + every.total_seconds()
            write(_run(name, sweep))
            runs[name] += 1
        stop.wait(max(0.0, min(next_run.values()) - time.monotonic()))
    write(f"run_sweeps: stopped after {', '.join(f'{runs[name]} {name}' for name in cron)} runs")
    return runs


def _run(name: str, sweep: Callable) -> str:
    """One sweep's summary line, or its exception's, after the time of day it started."""
    started = time.strftime("%H:%M:%S")
    try:
        said = sweep().summary()
    except Exception as exc:
        said = f"{name} failed: {type(exc).__name__}: {exc}"
    return f"{started} {said}"
