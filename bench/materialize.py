"""Workload 4: materialize 10,000 users x 20 events, then the same window again.

Data through the product's own code: ``sweeps.demo.seed_demo`` (each
user's rows written inside their ``tenant_scope``), events spread over the
look-ahead window. Then ``run_materialize(now, user_ids=…, sync_calendars=False)``
twice with the same ``now``: the second must write nothing.
"""

from __future__ import annotations

from datetime import timedelta

from bench import data, env


def run(sizes, users: list[int]) -> dict:
    from django.contrib.auth import get_user_model

    from core.config import NudgeConfig
    from sweeps.demo import seed_demo
    from sweeps.materialize import run_materialize

    config = NudgeConfig.from_settings()
    results = {"users": sizes.materialize_users, "events": sizes.materialize_events}
    with env.stage(f"materialize: seed_demo {sizes.materialize_users:,} users"):
        start = env.now()
        seconds, _ = env.timed(
            lambda: seed_demo(
                users=sizes.materialize_users,
                events_per_user=sizes.materialize_events,
                follow_ups_per_user=0,
                channel="console",
                start=start,
                window=config.lookahead,
                default_lead=config.default_lead,
                username_prefix="bm-",
            )
        )
        results["seed_seconds"] = seconds
        ids = list(
            get_user_model()
            .objects.filter(username__startswith="bm-")
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        data.truncate_queue()
        for table in ("calendar_events", "calendar_connections", "delivery_settings"):
            env.vacuum(table)
    at = env.now()
    for label in ("first", "second"):
        with env.stage(f"materialize: {label} run"):
            seconds, report = env.timed(
                lambda: run_materialize(at, user_ids=ids, sync_calendars=False)
            )
            assert report.ok, report.summary()
            results[label] = {
                "queued": report.queued,
                "removed": report.removed,
                "seconds": seconds,
                "rows_per_second": report.queued / seconds,
                "users_per_second": report.users / seconds,
            }
            print(f"  {report.summary()}", flush=True)
        if label == "first":
            env.vacuum("scheduled_sends")
    results["second_over_first"] = results["second"]["seconds"] / results["first"]["seconds"]
    results["window_minutes"] = config.lookahead / timedelta(minutes=1)
    return results
