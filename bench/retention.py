"""Issue 25: retention on the day-partitioned queue, side by side with the unpartitioned one.

``python -m bench.retention [--baseline e367e4e] [--per-day 250000] [--json PATH]``

The same rows in both versions: ``--per-day`` settled rows for each of four
days, over 5,000 tenants, loaded through each version's own ORM helpers
(``bench.data.queue_synthetic``, under ``support_scope``) and ANALYZEd. Then
each version's retention is run with the cut-off at the end of the oldest day:

* baseline (the issue's starting commit, one table): ``prune_settled``, the
  batched delete (5,000 rows a transaction) of that day's rows;
* current: ``drop_aged_partitions`` drops that day's partition (as the owner
  role), then ``prune_settled`` finds nothing left before the cut-off.

Measured for each: wall time of the retention call, WAL written (the
difference of ``pg_current_wal_lsn()`` around it, after a CHECKPOINT so both
start with the same full-page-image debt), and the queue's table and index
sizes after (summed over partitions). WAL is cluster-wide, so the two run
on a private PostgreSQL cluster of their own (the embedded server's
binaries, ``pgserver``, in a temporary directory), with autovacuum off: what a
batched delete leaves behind is dead rows in the same files until vacuum
comes, and this bench does not wait for it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_BASELINE = "e367e4e"
DAYS = 4
USERS = 5_000

LOAD = """
import json, os
from datetime import datetime, timedelta
from bench.data import make_users, queue_synthetic
p = json.loads(os.environ["RET"])
users = make_users(p["users"], "ret")
for n, day in enumerate(p["days"]):
    queue_synthetic(users, p["per_day"], start=datetime.fromisoformat(day),
                    span=timedelta(days=1), first_ref=1 + n * p["per_day"], settled=True)
"""

# Current only: a deployment that has run on day partitions for a while has
# a partition per past day; a fresh one has the attached table's instead.
DAY_PARTITIONS = """
import json, os
from datetime import date, datetime, timedelta
from django.db import connection
from scheduled_sends.queue.partitions import make_partitions
from tenancy.owner import connected_as_owner
from tenancy.rls import tenant_table_security
p = json.loads(os.environ["RET"])
first = datetime.fromisoformat(p["days"][0])
with connected_as_owner(), connection.cursor() as cursor:
    cursor.execute("DROP TABLE scheduled_sends_before")
    # Far history (bench.data's template row is dated 400 days back), ending
    # long before the measured day.
    cursor.execute(
        "CREATE TABLE scheduled_sends_before PARTITION OF scheduled_sends "
        "FOR VALUES FROM (MINVALUE) TO (%s)", [first - timedelta(days=365)])
    for statement in tenant_table_security("scheduled_sends_before", like="scheduled_sends"):
        cursor.execute(statement)
make_partitions(first.date(), len(p["days"]) + 3)
"""

MEASURE = """
import json, os, time
from datetime import datetime
from django.db import connection
from scheduled_sends.queue import transitions
cutoff = datetime.fromisoformat(os.environ["RET_CUTOFF"])
def lsn():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_lsn()")
        return cursor.fetchone()[0]
start = lsn()
began = time.perf_counter()
dropped = []
try:
    from scheduled_sends.queue.partitions import drop_aged_partitions
except ImportError:
    drop_aged_partitions = None
if drop_aged_partitions is not None:
    dropped = [d.name for d in drop_aged_partitions(cutoff)]
deleted = transitions.prune_settled(cutoff, 5000)
seconds = time.perf_counter() - began
with connection.cursor() as cursor:
    cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint", [start])
    wal = cursor.fetchone()[0]
print("RESULT " + json.dumps(
    {"seconds": seconds, "wal_bytes": wal, "deleted": deleted, "dropped": dropped}))
"""

# The queue's leaf tables: the one table (baseline), or every partition.
SIZES = """
SELECT coalesce(sum(pg_table_size(t.oid)), 0)::bigint,
       coalesce(sum(pg_indexes_size(t.oid)), 0)::bigint
  FROM (SELECT oid FROM pg_class WHERE oid = 'scheduled_sends'::regclass AND relkind = 'r'
        UNION ALL
        SELECT relid FROM pg_partition_tree('scheduled_sends') WHERE isleaf) AS t (oid)
"""


@contextmanager
def private_cluster() -> Iterator[tuple[str, str]]:
    """A throwaway PostgreSQL cluster (pgserver's binaries) on a Unix socket, autovacuum
    off; its admin URL and socket directory."""
    import pgserver

    with tempfile.TemporaryDirectory(prefix="nudge-retention-") as tmp:
        server = pgserver.get_server(Path(tmp) / "data", cleanup_mode="delete")
        try:
            admin_url = server.get_uri()
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM SET autovacuum = off")
                conn.execute("SELECT pg_reload_conf()")
            yield admin_url, server.get_postmaster_info().socket_dir
        finally:
            server.cleanup()


def _on_socket(tree, socket_dir: str):
    """The version's DATABASE_URL names the private cluster's socket."""
    tree.url = lambda: f"postgres://{tree.database}@/{tree.database}?host={socket_dir}"
    return tree


def _wal_lsn(admin_url: str) -> str:
    with psycopg.connect(admin_url) as conn:
        return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]


def _wal_since(admin_url: str, lsn: str) -> int:
    with psycopg.connect(admin_url) as conn:
        query = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint"
        return conn.execute(query, [lsn]).fetchone()[0]


def _sizes(admin_url: str, database: str) -> dict[str, int]:
    with psycopg.connect(admin_url, dbname=database) as conn:
        table, indexes = conn.execute(SIZES).fetchone()
    return {"table_bytes": table, "index_bytes": indexes}


def one_version(tree, admin_url: str, per_day: int, days: list[datetime]) -> dict:
    """Load the rows, then measure the version's own retention over the oldest day."""
    tree.fresh_database()
    payload = json.dumps(
        {"users": USERS, "per_day": per_day, "days": [d.isoformat() for d in days]}
    )
    if tree.label == "current":
        tree.run("shell", "-c", DAY_PARTITIONS, RET=payload)
    loaded_from = _wal_lsn(admin_url)
    tree.run("shell", "-c", LOAD, RET=payload)
    load_wal = _wal_since(admin_url, loaded_from)
    with psycopg.connect(admin_url, dbname=tree.database, autocommit=True) as conn:
        conn.execute("ANALYZE scheduled_sends")
        rows = conn.execute("SELECT count(*) FROM scheduled_sends").fetchone()[0]
    before = _sizes(admin_url, tree.database)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    out = tree.run("shell", "-c", MEASURE, RET_CUTOFF=(days[0] + timedelta(days=1)).isoformat())
    result = json.loads(out.split("RESULT ", 1)[1])
    return {
        "rows": rows,
        "load_wal_bytes": load_wal,  # WAL per queued row: the insert with every index
        "before": before,
        **result,
        "after": _sizes(admin_url, tree.database),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--per-day", type=int, default=250_000)
    parser.add_argument("--json", type=Path, default=ROOT / "bench/history/retention.json")
    args = parser.parse_args()
    with private_cluster() as (admin_url, socket_dir):
        os.environ["NUDGE_BENCH_ADMIN_URL"] = admin_url
        from bench.sidebyside import Tree, baseline_tree

        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        days = [today - timedelta(days=DAYS + 1 - n) for n in range(DAYS)]
        results = {"per_day": args.per_day, "days": DAYS, "users": USERS}
        with baseline_tree(args.baseline) as baseline:
            for tree in (baseline, Tree("current", ROOT)):
                _on_socket(tree, socket_dir)
                results[tree.label] = one_version(tree, admin_url, args.per_day, days)
                print(tree.label, json.dumps(results[tree.label]), flush=True)
        with psycopg.connect(admin_url) as conn:
            results["server"] = conn.execute("SHOW server_version").fetchone()[0]
    results["baseline_rev"] = args.baseline
    args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    if shutil.which("git") is None:
        sys.exit("git is needed to check out the baseline")
    main()
