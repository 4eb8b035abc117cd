"""Workload 5: a peer queue, Procrastinate, on the same server in the same run.

Procrastinate lives in its own schema (``procrastinate``) of the bench
database, created by the bench's login role — the application's own
non-superuser role: its schema needs no superuser (its one ``CREATE
EXTENSION plpgsql`` is guarded and plpgsql is always there). Its pool
connects with ``search_path=procrastinate``. Both queues do the same thing
with their own API, side by side:

* enqueue N jobs: Procrastinate's ``defer`` (one job per call) and
  ``batch_defer`` (20 per call); ours, the materializer's ``INSERT_NUDGES``
  (20 rows per user, inside that user's ``tenant_scope``);
* claim N jobs: Procrastinate's ``JobManager.fetch_job`` (one job per call —
  its only fetch); ours, ``transitions.claim_due`` with the default batch of 200,
  and with ``limit=1`` for a like-for-like per-job figure.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from bench import data, env

SCHEMA = "procrastinate"
PER_USER = 20


def _procrastinate(jobs: int) -> dict:
    import procrastinate

    env.owner_sql(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    # Procrastinate creates its own tables in it, as the login role.
    env.owner_sql(f"CREATE SCHEMA {SCHEMA} AUTHORIZATION {env.login_role()}")
    connector = procrastinate.PsycopgConnector(
        conninfo=env.conninfo(options=f"-c search_path={SCHEMA}"), min_size=1, max_size=2
    )
    app = procrastinate.App(connector=connector)

    @app.task(name="nudge", queue="nudges")
    def nudge(send_id: int) -> None:  # never run: the bench only enqueues and fetches
        pass

    figures = {}

    async def main() -> None:
        async with app.open_async():
            await app.schema_manager.apply_schema_async()
            half = jobs // 2
            started = time.perf_counter()
            for n in range(half):
                await nudge.defer_async(send_id=n)
            figures["enqueue: defer, 1 per call"] = _fig(half, time.perf_counter() - started)
            started = time.perf_counter()
            for first in range(half, jobs, PER_USER):
                await nudge.batch_defer_async(
                    *({"send_id": n} for n in range(first, min(jobs, first + PER_USER)))
                )
            figures[f"enqueue: batch_defer, {PER_USER} per call"] = _fig(
                jobs - half, time.perf_counter() - started
            )
            manager = app.job_manager
            worker_id = await manager.register_worker()
            fetched = 0
            started = time.perf_counter()
            while await manager.fetch_job(queues=None, worker_id=worker_id) is not None:
                fetched += 1
            figures["claim: fetch_job, 1 per call"] = _fig(fetched, time.perf_counter() - started)

    asyncio.run(main())
    return figures


def _ours(jobs: int, users: list[int]) -> dict:
    from django.db import connection

    from core.config import NudgeConfig
    from scheduled_sends.queue import statements, transitions
    from tenancy.scope import tenant_scope

    config = NudgeConfig.from_settings()
    figures = {}
    data.truncate_queue()
    at = env.now()
    owners = users[: jobs // PER_USER + 1]
    started = time.perf_counter()
    made = 0
    for index, user_id in enumerate(owners):
        count = min(PER_USER, jobs - made)
        if count <= 0:
            break
        fire = [at - timedelta(seconds=30 + n) for n in range(count)]
        with tenant_scope(user_id), connection.cursor() as cursor:
            cursor.execute(
                statements.INSERT_NUDGES,
                {
                    "user_id": user_id,
                    "kinds": ["follow_up"] * count,
                    "ref_ids": [index * PER_USER + n + 1 for n in range(count)],
                    "fire_ats": fire,
                    "starts": [at + timedelta(minutes=10)] * count,
                },
            )
            made += len(cursor.fetchall())
    figures[f"enqueue: materializer's INSERT_NUDGES, {PER_USER} per user"] = _fig(
        made, time.perf_counter() - started
    )
    env.vacuum("scheduled_sends")
    for label, limit, share in (
        (f"claim: claim_due, batch of {config.batch_size}", None, made // 2),
        ("claim: claim_due, limit=1", 1, made - made // 2),
    ):
        claimed = 0
        started = time.perf_counter()
        while claimed < share:
            rows = transitions.claim_due(at, config, limit=limit)
            if not rows:
                break
            claimed += len(rows)
        figures[label] = _fig(claimed, time.perf_counter() - started)
    return figures


def _fig(jobs: int, seconds: float) -> dict:
    return {"jobs": jobs, "seconds": seconds, "per_second": jobs / seconds if seconds else 0.0}


def run(sizes, users: list[int]) -> dict:
    import procrastinate

    results = {"jobs": sizes.peer_jobs, "version": procrastinate.__version__, "figures": {}}
    with env.stage(f"peer: Procrastinate, {sizes.peer_jobs:,} jobs"):
        results["figures"].update(_procrastinate(sizes.peer_jobs))
    with env.stage(f"peer: ours, {sizes.peer_jobs:,} rows"):
        results["figures"].update(_ours(sizes.peer_jobs, users))
    f = results["figures"]
    batch = next(v for k, v in f.items() if k.startswith("claim: claim_due, batch"))
    results["claim_ratio_batch"] = (
        batch["per_second"] / f["claim: fetch_job, 1 per call"]["per_second"]
    )
    results["claim_ratio_single"] = (
        f["claim: claim_due, limit=1"]["per_second"]
        / f["claim: fetch_job, 1 per call"]["per_second"]
    )
    return results
