"""Workload 6: one tenant's burst among everyone else's nudges of the same minute.

One tenant has ``burst`` follow-ups whose nudges fire at the same instant; a
thousand other tenants have one each at that instant too. The burst is queued
first, so among equal ``fire_at`` the index (ties in heap order) hands it out
first: the worst case for the plain ``ORDER BY fire_at``. Deliver workers as in
workload 3; from the rows' ``sent_at`` (the database clock): when the last
other tenant's nudge went out, and whether any fell past grace.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

from bench import data, env
from bench.drain import run_workers


def _sent_offsets(start: float, burst_user: int) -> tuple[list[float], list[float], int, int]:
    from django.db import connection

    from core.config import NudgeConfig
    from tenancy.scope import support_scope

    grace = NudgeConfig.from_settings().grace
    with support_scope(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id = %s, extract(epoch FROM sent_at) - %s, sent_at > fire_at + %s, "
            "outcome FROM scheduled_sends",
            [burst_user, start, grace],
        )
        rows = cursor.fetchall()
    burst = [float(r[1]) for r in rows if r[0] and r[1] is not None]
    others = [float(r[1]) for r in rows if not r[0] and r[1] is not None]
    late = sum(1 for r in rows if not r[0] and r[2])
    expired = sum(1 for r in rows if r[3] == "expired")
    return burst, others, late, expired


def run(sizes, users: list[int]) -> dict:
    tenants = users[: sizes.burst_others + 1]
    results = {"burst": sizes.burst, "others": sizes.burst_others, "rounds": []}
    with env.stage(f"fairness: {sizes.burst:,} burst + {sizes.burst_others:,} others"):
        data.add_follow_ups(
            tenants,
            sizes.burst + sizes.burst_others,
            due_at=env.now() + timedelta(hours=2),
            tag="bf",
            first_user_gets=sizes.burst,
        )
    with tempfile.TemporaryDirectory(prefix="nudge-bench-") as tmp:
        for workers in sizes.fairness_workers:
            with env.stage(f"fairness: {workers} worker(s)"):
                data.truncate_queue()
                data.queue_follow_ups("bf", fire_at=env.now() - timedelta(seconds=5))
                env.vacuum("scheduled_sends")
                figures = run_workers(workers, Path(tmp), f"fair{workers}")
                burst, others, late, expired = _sent_offsets(figures["started"], tenants[0])
                results["rounds"].append(
                    {
                        "workers": workers,
                        "others_sent": len(others),
                        "others_last_sent_s": max(others) if others else float("nan"),
                        "others_median_sent_s": env.median(others),
                        "burst_last_sent_s": max(burst) if burst else float("nan"),
                        "burst_median_sent_s": env.median(burst),
                        "others_late": late,
                        "expired": expired,
                        "duplicates": figures["duplicates"],
                        "settled_per_second": (len(burst) + len(others)) / figures["seconds"],
                    }
                )
    first = results["rounds"][0]
    from core.config import NudgeConfig

    grace_s = NudgeConfig.from_settings().grace.total_seconds()
    rate = first["settled_per_second"]
    results["verdict"] = (
        f"With the burst first, every other tenant waits behind it: the last one went out "
        f"{first['others_last_sent_s']:.1f}s after the start with {first['workers']} worker(s) "
        f"(median {first['others_median_sent_s']:.1f}s), against ~"
        f"{sizes.burst_others / rate:.1f}s had they been served first. Nobody fell past the "
        f"{grace_s / 60:.0f}-minute grace here ({first['others_late']} late, "
        f"{first['expired']} expired), but the delay is O(burst): at {rate:.0f} rows/s one "
        f"tenant's burst of ~{rate * grace_s:,.0f} same-minute nudges would push everyone "
        f"else past grace. See the proposed fix in the notes."
    )
    return results
