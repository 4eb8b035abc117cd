"""One deliver worker process for the drain and fairness workloads.

``python -m bench.worker OUT.json READY GO`` — sets Django up (with the
environment the parent gave it: the bench database, the recording channel),
wraps ``scheduled_sends.queue.transitions.claim_due`` in a timer (here, not in product
code), signals READY, waits for GO, then runs ``run_deliver()`` until a run
claims nothing, and writes what it saw to OUT.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path


def start_released(
    count: int, workdir: Path, label: str, *, cwd: Path, env: dict[str, str]
) -> tuple[list[subprocess.Popen], list[Path]]:
    """Start ``count`` worker processes, wait until each is ready, release them together.

    Returns the processes and the paths their reports will be written to.
    """
    go = workdir / f"{label}.go"
    go.unlink(missing_ok=True)
    processes, outs, readies = [], [], []
    for n in range(count):
        out, ready = workdir / f"{label}-{n}.json", workdir / f"{label}-{n}.ready"
        for stale in (out, ready):
            stale.unlink(missing_ok=True)
        outs.append(out)
        readies.append(ready)
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.worker", str(out), str(ready), str(go)],
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    deadline = time.time() + 120
    while not all(r.exists() for r in readies):
        if time.time() > deadline or any(p.poll() is not None for p in processes):
            errors = [p.communicate()[1][-2000:] for p in processes if p.poll() is not None]
            raise RuntimeError(f"a worker did not start: {errors}")
        time.sleep(0.01)
    go.touch()
    return processes, outs


def main() -> None:
    out, ready, go = (Path(p) for p in sys.argv[1:4])
    from bench import env

    env.setup_django()
    from scheduled_sends.queue import transitions
    from sweeps.deliver import run_deliver

    original = transitions.claim_due
    claims: list[tuple[float, int]] = []

    def timed_claim_due(*args, **kwargs):
        started = time.perf_counter()
        rows = original(*args, **kwargs)
        claims.append(((time.perf_counter() - started) * 1000, len(rows)))
        return rows

    transitions.claim_due = timed_claim_due
    env.sql("SELECT 1")  # connect before the start line
    ready.touch()
    while not go.exists():
        time.sleep(0.002)
    started = time.time()
    totals = {"claimed": 0, "sent": 0, "skipped": 0, "failed": 0, "retried": 0, "lost": 0}
    runs = 0
    while True:
        report = run_deliver()
        runs += 1
        totals["claimed"] += report.claimed
        totals["sent"] += report.sent
        totals["skipped"] += report.skipped
        totals["failed"] += report.failed
        totals["retried"] += report.retried
        totals["lost"] += report.lost_claims
        if report.claimed == 0:
            break
    finished = time.time()
    last_work = finished - (claims[-1][0] / 1000 if claims else 0)
    out.write_text(
        json.dumps(
            {
                "started": started,
                "finished": finished,
                "last_work": last_work,
                "runs": runs,
                "claims": claims,
                **totals,
            }
        )
    )


if __name__ == "__main__":
    main()
