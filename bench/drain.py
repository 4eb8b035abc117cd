"""Workload 3: drain a due backlog with 1, 2 and 4 deliver worker processes.

Each round queues the same due rows afresh (one per follow-up titled
``bd…``, as materialize would write them), then starts the workers — separate
processes running ``run_deliver()`` against the bench database with the
recording channel (``NUDGE_CHANNEL_BACKENDS`` / ``NUDGE_RECORDING_FILE``) —
and waits. Settled rows per second run from the common start to the last
settle; duplicates are counted from the recording file; each ``claim_due``
call is timed inside the workers (bench/worker.py).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path

from bench import data, env
from bench.worker import start_released

RECORDING = json.dumps({"console": "tests.support.recording.RecordingChannel"})
TAG = re.compile(r"\b(b[df]\d+)\b")


def run_workers(count: int, workdir: Path, label: str) -> dict:
    """Start ``count`` workers, release them together, wait; their merged figures."""
    recording = workdir / f"{label}.jsonl"
    child = env.child_env(
        NUDGE_CHANNEL_BACKENDS=RECORDING,
        NUDGE_RECORDING_FILE=str(recording),
        NUDGE_RUN_BUDGET_SECONDS="600",
        NUDGE_LEASE_SECONDS="1200",
    )
    procs, outs = start_released(count, workdir, label, cwd=env.project_root(), env=child)
    for proc in procs:
        _, stderr = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"worker failed: {stderr[-2000:]}")
    reports = [json.loads(o.read_text()) for o in outs]
    lines = recording.read_text().splitlines() if recording.exists() else []
    tags = Counter()
    for line in lines:
        match = TAG.search(json.loads(line)["text"])
        tags[match.group(1) if match else line] += 1
    started = min(r["started"] for r in reports)
    finished = max(r["last_work"] for r in reports)
    return {
        "workers": count,
        "started": started,
        "seconds": finished - started,
        "recorded": len(lines),
        "distinct": len(tags),
        "duplicates": len(lines) - len(tags),
        "claims": [c for r in reports for c in r["claims"]],
        "sent": sum(r["sent"] for r in reports),
        "skipped": sum(r["skipped"] for r in reports),
        "failed": sum(r["failed"] for r in reports),
        "retried": sum(r["retried"] for r in reports),
        "lost_claims": sum(r["lost"] for r in reports),
        "per_worker_sent": [r["sent"] for r in reports],
    }


def run(sizes, users: list[int]) -> dict:
    results = {"rows": sizes.drain_rows, "tenants": sizes.drain_tenants, "rounds": []}
    at = env.now()
    with env.stage(f"drain: {sizes.drain_rows:,} follow-ups over {sizes.drain_tenants:,} tenants"):
        data.add_follow_ups(
            users[: sizes.drain_tenants],
            sizes.drain_rows,
            due_at=at + timedelta(hours=2),
            tag="bd",
        )
        env.vacuum("follow_ups")
    with tempfile.TemporaryDirectory(prefix="nudge-bench-") as tmp:
        for workers in sizes.workers:
            with env.stage(f"drain: {workers} worker(s)"):
                data.truncate_queue()
                queued = data.queue_follow_ups(
                    "bd", fire_at=env.now() - timedelta(minutes=2), spread=timedelta(minutes=1)
                )
                env.vacuum("scheduled_sends")
                figures = run_workers(workers, Path(tmp), f"drain{workers}")
                settled = figures["sent"] + figures["skipped"] + figures["failed"]
                figures.update(
                    {
                        "queued": queued,
                        "settled": settled,
                        "settled_per_second": settled / figures["seconds"],
                        "batches": len([c for c in figures["claims"] if c[1]]),
                        "claim_ms": [c[0] for c in figures["claims"] if c[1]],
                        "empty_claim_ms": [c[0] for c in figures["claims"] if not c[1]],
                    }
                )
                del figures["claims"]
                results["rounds"].append(figures)
                print(
                    f"  {settled:,} settled in {figures['seconds']:.1f}s "
                    f"({figures['settled_per_second']:.0f}/s), duplicates "
                    f"{figures['duplicates']}, recorded {figures['recorded']:,}",
                    flush=True,
                )
    return results
