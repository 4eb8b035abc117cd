"""Workload 7: settled history does not grow the claim's index or its latency.

A queue of pending rows (most ahead, some due) stays throughout. Then waves of
rows flow through as they do in production — queued, then settled — with a
plain VACUUM after each wave (what autovacuum does; this bench does not wait
for it). The settle is set-based (``UPDATE … SET sent_at, outcome``) under
``support_scope()``; a real deliver run settles with the same columns.
Before and after: every index's ``pg_relation_size``, and the claim of 200
(EXPLAIN ANALYZE under the bypass, rolled back).

Then a claim-heavy phase (every due row claimed, in batches, by
``transitions.claim_due``) and its settle, with ``n_tup_upd``/``n_tup_hot_upd``
deltas from ``pg_stat_user_tables``; and ``manage.py prune_sends`` in its own
process over the settled history.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

from bench import data, env


def _index_sizes() -> dict[str, int]:
    return dict(
        env.sql(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'scheduled_sends'::regclass ORDER BY c.relname"
        )
    )


def _pending() -> int:
    # Tuples the partial index's predicate admits, counted by the planner-free way.
    from django.db import connection

    from tenancy.scope import support_scope

    with support_scope(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE sent_at IS NULL AND outcome IS NULL), count(*) "
            "FROM scheduled_sends"
        )
        return cursor.fetchone()


def _claimed_at_in_indexes() -> list[str]:
    """Indexes whose keys, expressions or predicate mention ``claimed_at``."""
    rows = env.sql(
        """
        SELECT c.relname
          FROM pg_index i
          JOIN pg_class c ON c.oid = i.indexrelid
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attname = 'claimed_at'
         WHERE i.indrelid = 'scheduled_sends'::regclass
           AND (a.attnum = ANY (i.indkey)
                OR pg_get_expr(i.indexprs, i.indrelid) LIKE '%%claimed_at%%'
                OR pg_get_expr(i.indpred, i.indrelid) LIKE '%%claimed_at%%')
        """
    )
    return [r[0] for r in rows]


def _update_counters() -> tuple[int, int]:
    """(n_tup_upd, n_tup_hot_upd), after this backend's pending stats are flushed."""
    from django.db import connection

    connection.close()  # a backend flushes its statistics when it exits
    time.sleep(0.6)
    env.sql("SELECT pg_stat_clear_snapshot()")
    return env.sql(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'scheduled_sends'"
    )[0]


def _settle_all_pending_before(cutoff) -> int:
    from django.db import connection

    from tenancy.scope import support_scope

    with support_scope(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE scheduled_sends SET sent_at = fire_at + interval '1 minute', "
            "outcome = 'sent', channel = 'console' "
            "WHERE sent_at IS NULL AND outcome IS NULL AND fire_at < %s",
            [cutoff],
        )
        return cursor.rowcount


def run(sizes, users: list[int]) -> dict:
    from core.config import NudgeConfig
    from scheduled_sends.queue import transitions
    from tests.support.queue import settle_one

    results: dict = {"waves": sizes.bloat_waves, "prune_days": 7}
    at = env.now()
    with env.stage(f"bloat: baseline {sizes.bloat_pending:,} pending + {sizes.bloat_due:,} due"):
        data.truncate_queue()
        data.queue_synthetic(
            users, sizes.bloat_pending, start=at + timedelta(minutes=5), span=timedelta(hours=3)
        )
        data.queue_synthetic(
            users,
            sizes.bloat_due,
            start=at - timedelta(minutes=10),
            span=timedelta(minutes=9),
            first_ref=50_000_000,
        )
        env.vacuum("scheduled_sends")
        results["index_bytes_before"] = _index_sizes()
        results["pending_before"] = _pending()[0]
        env.explain_claim(at)
        before = [env.explain_claim(at) for _ in range(sizes.reps)]
        results["claim_before_ms"] = [e["db_ms"] for e in before]
        results["claim_before_buffers"] = [e["buffers"] for e in before]

    with env.stage(
        f"bloat: {sizes.bloat_waves} waves of {sizes.bloat_wave_rows:,} queued, settled"
    ):
        settled = 0
        history_start = at - timedelta(days=10)
        for wave in range(sizes.bloat_waves):
            start = history_start + timedelta(hours=wave)
            data.queue_synthetic(
                users,
                sizes.bloat_wave_rows,
                start=start,
                span=timedelta(hours=1),
                first_ref=100_000_000 + wave * sizes.bloat_wave_rows,
            )
            settled += _settle_all_pending_before(at - timedelta(days=5))
            env.vacuum("scheduled_sends", analyze=False)
            sizes_now = _index_sizes()
            results.setdefault("per_wave_kib", []).append(
                {
                    "wave": wave + 1,
                    "settled_so_far": settled,
                    "due_idx": sizes_now["scheduled_sends_due_idx"] // 1024,
                    "pkey": sizes_now["scheduled_sends_pkey"] // 1024,
                }
            )
        env.vacuum("scheduled_sends")
        results["settled_total"] = settled
        results["index_bytes_after"] = _index_sizes()
        pending_after, total_after = _pending()
        results["pending_after"] = pending_after
        results["rows_after"] = total_after
        env.explain_claim(at)
        after = [env.explain_claim(at) for _ in range(sizes.reps)]
        results["claim_after_ms"] = [e["db_ms"] for e in after]
        results["claim_after_buffers"] = [e["buffers"] for e in after]
        results["claim_ratio"] = env.median(results["claim_after_ms"]) / env.median(
            results["claim_before_ms"]
        )
        due = "scheduled_sends_due_idx"
        results["pending"] = results["pending_before"]
        results["due_idx_bytes_per_pending_before"] = (
            results["index_bytes_before"][due] / results["pending_before"]
        )
        results["due_idx_bytes_per_pending_after"] = (
            results["index_bytes_after"][due] / results["pending_after"]
        )

    with env.stage("bloat: HOT share of claims and of settles"):
        indexed = _claimed_at_in_indexes()
        results["claimed_at_indexed"] = bool(indexed)
        results["indexes_with_claimed_at"] = indexed
        config = NudgeConfig.from_settings()
        phases = []
        upd0, hot0 = _update_counters()
        claimed_rows = []
        while len(claimed_rows) < sizes.hot_claims:
            batch = transitions.claim_due(at, config)
            if not batch:
                break
            claimed_rows.extend(batch)
        upd1, hot1 = _update_counters()
        phases.append(
            _phase("claim (claimed_at, claim_token)", len(claimed_rows), upd1 - upd0, hot1 - hot0)
        )
        settled_rows = claimed_rows[: sizes.hot_claims // 10]
        for row in settled_rows:
            settle_one(
                row,
                transitions.Transition.SENT,
                at,
                channel="console",
                message_id=f"bench-{row.id}",
            )
        upd2, hot2 = _update_counters()
        phases.append(
            _phase(
                "settle_sent (sent_at, outcome, provider id)",
                len(settled_rows),
                upd2 - upd1,
                hot2 - hot1,
            )
        )
        results["hot_phases"] = phases
        results["hot_fillfactor_50"] = _hot_with_fillfactor(at, 50, sizes.hot_claims)

    with env.stage("bloat: manage.py prune_sends over the settled history"):
        started = time.perf_counter()
        completed = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "prune_sends",
                "--older-than",
                str(results["prune_days"]),
            ],
            cwd=env.project_root(),
            env=env.child_env(),
            capture_output=True,
            text=True,
            check=True,
        )
        results["prune_seconds"] = time.perf_counter() - started
        results["prune_output"] = completed.stdout.strip().splitlines()[-1]
        results["pruned"] = int(results["prune_output"].split("deleted ")[1].split()[0])
        env.vacuum("scheduled_sends")
        results["index_bytes_after_prune"] = _index_sizes()
        # The due rows were claimed above: settle them (as a run would, failed) and
        # queue a fresh backlog like the first one.
        from django.db import connection

        from tenancy.scope import support_scope

        with support_scope(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE scheduled_sends SET outcome = 'failed' "
                "WHERE claimed_at IS NOT NULL AND outcome IS NULL AND sent_at IS NULL"
            )
        fresh = env.now()
        data.queue_synthetic(
            users,
            sizes.bloat_due,
            start=fresh - timedelta(minutes=10),
            span=timedelta(minutes=9),
            first_ref=60_000_000,
        )
        env.vacuum("scheduled_sends")
        env.explain_claim(fresh)
        pruned = [env.explain_claim(fresh) for _ in range(sizes.reps)]
        results["claim_after_prune_ms"] = [e["db_ms"] for e in pruned]
        results["claim_after_prune_buffers"] = [e["buffers"] for e in pruned]
    return results


def _hot_with_fillfactor(at, fillfactor: int, claims: int) -> dict:
    """The same claims on a copy of the queue's pending rows with a lower fillfactor.

    The copy has the same columns and indexes (``LIKE … INCLUDING ALL``), no
    RLS, and is claimed with the same ``CLAIM_DUE`` text as the login role.
    """
    from django.db import connection, transaction

    from scheduled_sends.queue import statements
    from tenancy.scope import support_scope

    copy = f"scheduled_sends_ff{fillfactor}"
    env.owner_sql(f"DROP TABLE IF EXISTS {copy}")
    env.owner_sql(f"CREATE TABLE {copy} (LIKE scheduled_sends INCLUDING ALL)")
    env.owner_sql(f"ALTER TABLE {copy} SET (fillfactor = {fillfactor}, autovacuum_enabled = false)")
    from scheduled_sends.models import ScheduledSend

    columns = [f.column for f in ScheduledSend._meta.concrete_fields if not f.generated]
    values = [
        "NULL" if c in ("claimed_at", "claim_token", "send_started_at") else c for c in columns
    ]
    with support_scope(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {copy} ({', '.join(columns)}) SELECT {', '.join(values)} "
            "FROM scheduled_sends WHERE outcome IS NULL ORDER BY fire_at, id"
        )
    env.vacuum(copy)
    before = _counters_of(copy)
    claimed = 0
    statement = statements.CLAIM_DUE.replace("scheduled_sends", copy)
    while claimed < claims:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, env.claim_params(at))
            got = len(cursor.fetchall())
        if not got:
            break
        claimed += got
    after = _counters_of(copy)
    env.owner_sql(f"DROP TABLE {copy}")
    return _phase(
        f"claim on a copy with fillfactor {fillfactor}",
        claimed,
        after[0] - before[0],
        after[1] - before[1],
    )


def _counters_of(table: str) -> tuple[int, int]:
    from django.db import connection

    connection.close()
    time.sleep(0.6)
    return env.sql(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s", [table]
    )[0]


def _phase(name: str, rows: int, upd: int, hot: int) -> dict:
    return {
        "phase": name,
        "rows": rows,
        "upd": upd,
        "hot": hot,
        "hot_share": hot / upd if upd else float("nan"),
    }
