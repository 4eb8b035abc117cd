"""Issue 25, item 1: one materialize cycle shared by 1, 2 and 4 independent processes.

``python -m bench.cycle [--users 5000] [--per-user 5] [--tag T]``

Seeds one database (``bench.sidebyside``'s tree, seed and server) with users
and follow-ups spread over the look-ahead, then for each process count empties
the queue and the cycle tables and starts that many ``manage.py materialize
--now T --no-sync`` at once, each in its own process group (as separate
machines would be), and times the cycle from the first start to the last
exit. Then two processes again, one SIGKILLed (its whole group) once a third
of the slices are done, with a short slice lease: every user must still be
queued in that cycle, none twice. Prints JSON; BENCHMARKS.md's "Issue 25"
section is written from it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import psycopg

from bench.sidebyside import ADMIN_URL, Tree, _seed_group
from scheduled_sends import cycle_statements as statements

ROOT = Path(__file__).resolve().parents[1]
RESET = "TRUNCATE scheduled_sends, materialize_slices, materialize_cycles, sweep_runs"


def _admin(tree: Tree):
    return psycopg.connect(ADMIN_URL, dbname=tree.database, autocommit=True)


def _start(tree: Tree, now: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        tree.command("materialize", "--now", now, "--no-sync"),
        cwd=tree.path,
        env=tree.env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like another machine's
    )


def _check(tree: Tree, users: int, per_user: int) -> dict:
    """Every user queued once: the rows, the slices done, the run log."""
    with _admin(tree) as admin:
        queued, distinct_keys = admin.execute(
            "SELECT count(*), count(DISTINCT (user_id, kind, ref_id, intended_at)) "
            "FROM scheduled_sends"
        ).fetchone()
        users_queued = admin.execute(
            "SELECT count(*) FROM (SELECT user_id FROM scheduled_sends GROUP BY user_id "
            "HAVING count(*) = %s) AS whole",
            (per_user,),
        ).fetchone()[0]
        slices, done, visited, takeovers, participants = admin.execute(
            "SELECT count(*), count(done_at), sum(users), sum(takeovers), "
            "count(DISTINCT claimed_by) FROM materialize_slices"
        ).fetchone()
        runs = admin.execute(
            "SELECT coalesce(counts->>'slices_taken', 'killed') FROM sweep_runs ORDER BY id"
        ).fetchall()
    return {
        "rows": queued,
        "rows_expected": users * per_user,
        "duplicates": queued - distinct_keys,
        "users_with_all_rows": users_queued,
        "slices": slices,
        "slices_done": done,
        "users_visited_by_slices": int(visited or 0),
        "takeovers": int(takeovers or 0),
        "participants": participants,
        "slices_per_run": [r[0] for r in runs],
    }


def cycle(tree: Tree, now: str, processes: int, users: int, per_user: int) -> dict:
    with _admin(tree) as admin:
        admin.execute(RESET)
    started = time.monotonic()
    running = [_start(tree, now) for _ in range(processes)]
    for process in running:
        _, err = process.communicate()
        if process.returncode:
            raise RuntimeError(err)
    wall = time.monotonic() - started
    return {"processes": processes, "wall_s": round(wall, 1), **_check(tree, users, per_user)}


def killed(tree: Tree, now: str, users: int, per_user: int, lease: int) -> dict:
    """Two participants; one SIGKILLed (process group) once a third of the slices are done."""
    with _admin(tree) as admin:
        admin.execute(RESET)
        env = {"NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS": str(lease)}
        started = time.monotonic()
        victim, survivor = _start(tree, now, **env), _start(tree, now, **env)
        while True:
            row = admin.execute(
                "SELECT count(*), count(done_at) FROM materialize_slices"
            ).fetchone()
            if row[0] and row[1] * 3 >= row[0]:
                break
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic() - started
        victim.wait()
    out, err = survivor.communicate()
    if survivor.returncode:
        raise RuntimeError(err)
    wall = time.monotonic() - started
    return {
        "lease_s": lease,
        "killed_at_s": round(killed_at, 1),
        "wall_s": round(wall, 1),
        "survivor_summary": out.strip().splitlines()[-1],
        **_check(tree, users, per_user),
    }


def claim_cost(tree: Tree, slices: int = 400) -> dict:
    """One process claiming and finishing every slice of a 400-slice cycle (100,000 users)."""
    with _admin(tree) as admin:
        slot = admin.execute("SELECT date_trunc('hour', now()) + interval '1 day'").fetchone()[0]
        admin.execute(
            "INSERT INTO materialize_cycles (starts_at, as_of, slices, created_at) "
            "VALUES (%s, %s, %s, now())",
            (slot, slot, slices),
        )
        admin.execute(
            "INSERT INTO materialize_slices (cycle_id, position, after_id, up_to, claimed_by, "
            "users, takeovers) SELECT %s, i, i * 250, i * 250 + 250, '', 0, 0 "
            "FROM generate_series(0, %s - 1) AS i",
            (slot, slices),
        )
        params = {"cycle": slot, "me": "bench:1", "lease": timedelta(seconds=180)}
        started = time.perf_counter()
        claimed = 0
        while row := admin.execute(statements.CLAIM_SLICE, params).fetchone():
            admin.execute(statements.FINISH_SLICE, {**params, "slice": row[0], "users": 250})
            claimed += 1
        seconds = time.perf_counter() - started
        admin.execute("DELETE FROM materialize_slices WHERE cycle_id = %s", (slot,))
        admin.execute("DELETE FROM materialize_cycles WHERE starts_at = %s", (slot,))
    return {"slices": claimed, "ms_per_claim_and_finish": round(1000 * seconds / claimed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=5_000)
    parser.add_argument("--per-user", type=int, default=5)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--lease", type=int, default=5)
    parser.add_argument("--tag", default="")
    parser.add_argument("--claim-cost-only", action="store_true")
    args = parser.parse_args()
    tree = Tree("cycle", ROOT, args.tag)
    if args.claim_cost_only:  # on the database a full run left
        print(json.dumps(claim_cost(tree)), flush=True)
        return
    tree.fresh_database()
    db_now = tree.database_now()
    seeded = time.monotonic()
    tree.seed(
        _seed_group(
            "cyc", args.users, args.per_user, db_now + timedelta(minutes=20), spread_seconds=9000
        )
    )
    results: dict = {
        "users": args.users,
        "per_user": args.per_user,
        "seed_s": round(time.monotonic() - seeded, 1),
        "cycles": [],
    }
    now = db_now.isoformat()
    for count in (int(p) for p in args.processes.split(",")):
        results["cycles"].append(cycle(tree, now, count, args.users, args.per_user))
        print(json.dumps(results["cycles"][-1]), flush=True)
    results["killed"] = killed(tree, now, args.users, args.per_user, args.lease)
    results["claim_cost"] = claim_cost(tree)
    print(json.dumps(results, indent=1), flush=True)


if __name__ == "__main__":
    main()
