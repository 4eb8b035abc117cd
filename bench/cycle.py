"""Issue 25, item 1: one materialize cycle shared by 1, 2 and 4 independent processes.

``python -m bench.cycle [--users 20000] [--per-user 5] [--baseline e367e4e] [--tag T]``

Per version (the baseline commit in a temporary git worktree first, then this
checkout; never both at once): one database seeded with users and follow-ups
spread over the look-ahead (``bench.cold_fill``'s set-based seed through the
version's own ORM templates, then ``ANALYZE``), then for each process count
the queue and the cycle tables emptied and that many ``manage.py materialize
--now T --no-sync`` started at once, each in its own process group (as
separate machines would be), timed from the first start to the last exit.
Then, on this checkout, two processes again, one SIGKILLed (its whole group)
once a third of the slices are done, with a short slice lease: every user
must still be queued in that cycle, none twice.

The baseline (by default ``e367e4e``, the issue's starting commit) lets one
run at a time hold an advisory lock: a second independent process stands
aside, so its 2- and 4-process figure is its 1-process figure. Its own
``--workers N`` forks are the fair comparison on one machine: it is run as one
process with ``--workers 1`` and ``--workers 2``.

Autovacuum is off on the bench server: a thread runs ``ANALYZE
scheduled_sends`` every 60 s during each cycle (``bench.cold_fill``). The run
budget is raised so a slow cycle is measured whole. Load averages before and
after each run. Writes ``bench/history/cycle.json``; BENCHMARKS.md's "Issue 25"
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

from bench.cold_fill import (
    DEFAULT_BASELINE,
    admin,
    analyzing,
    check,
    load,
    queue_tables,
    reset,
    run_processes,
    seed,
    start,
)
from bench.sidebyside import GIT, Tree, baseline_tree

ROOT = Path(__file__).resolve().parents[1]


def _check(tree: Tree, users: int, per_user: int) -> dict:
    """Every user queued once: the rows (``cold_fill.check``), and (where the version has
    them) the slices."""
    result = check(tree, users, per_user)
    if "materialize_slices" not in queue_tables(tree):
        return result
    with admin(tree) as db:
        slices, done, visited, takeovers, participants = db.execute(
            "SELECT count(*), count(done_at), sum(users), sum(takeovers), "
            "count(DISTINCT claimed_by) FROM materialize_slices"
        ).fetchone()
        runs = db.execute(
            "SELECT coalesce(counts->>'slices_taken', 'killed') FROM sweep_runs ORDER BY id"
        ).fetchall()
    return {
        **result,
        "slices": slices,
        "slices_done": done,
        "users_visited_by_slices": int(visited or 0),
        "takeovers": int(takeovers or 0),
        "participants": participants,
        "slices_per_run": [r[0] for r in runs],
    }


def cycle(tree: Tree, now: str, processes: int, users: int, per_user: int, *args: str) -> dict:
    reset(tree)
    ran = run_processes(tree, now, processes, *args)
    return {"processes": processes, "args": list(args), **ran, **_check(tree, users, per_user)}


def killed(tree: Tree, now: str, users: int, per_user: int, lease: int) -> dict:
    """Two participants; one SIGKILLed (process group) once a third of the slices are done."""
    reset(tree)
    before = load()
    with admin(tree) as db, analyzing(tree):
        env = {"NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS": str(lease)}
        started = time.monotonic()
        victim, survivor = start(tree, now, **env), start(tree, now, **env)
        while True:
            row = db.execute("SELECT count(*), count(done_at) FROM materialize_slices").fetchone()
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
        "load_before": before,
        "load_after": load(),
        **_check(tree, users, per_user),
    }


def claim_cost(tree: Tree, slices: int = 400) -> dict:
    """One process claiming and finishing every slice of a 400-slice cycle (100,000 users)."""
    from sweeps import cycle_statements as statements

    with admin(tree) as db:
        slot = db.execute("SELECT date_trunc('hour', now()) + interval '1 day'").fetchone()[0]
        db.execute(
            "INSERT INTO materialize_cycles (starts_at, as_of, slices, created_at) "
            "VALUES (%s, %s, %s, now())",
            (slot, slot, slices),
        )
        db.execute(
            "INSERT INTO materialize_slices (cycle_id, position, after_id, up_to, claimed_by, "
            "users, takeovers) SELECT %s, i, i * 250, i * 250 + 250, '', 0, 0 "
            "FROM generate_series(0, %s - 1) AS i",
            (slot, slices),
        )
        params = {"cycle": slot, "me": "bench:1", "lease": timedelta(seconds=180)}
        started = time.perf_counter()
        claimed = 0
        while row := db.execute(statements.CLAIM_SLICE, params).fetchone():
            db.execute(statements.FINISH_SLICE, {**params, "slice": row[0], "users": 250})
            claimed += 1
        seconds = time.perf_counter() - started
        db.execute("DELETE FROM materialize_slices WHERE cycle_id = %s", (slot,))
        db.execute("DELETE FROM materialize_cycles WHERE starts_at = %s", (slot,))
    return {"slices": claimed, "ms_per_claim_and_finish": round(1000 * seconds / claimed, 2)}


def measure(tree: Tree, args, baseline: bool) -> dict:
    tree.fresh_database()
    db_now = tree.database_now()
    results: dict = {
        "users": args.users,
        "per_user": args.per_user,
        "seed_s": seed(tree, args.users, args.per_user, db_now + timedelta(minutes=20)),
        "cycles": [],
    }
    now = db_now.isoformat()
    if baseline:  # one process; its own forks
        runs = [(1, "--workers", str(n)) for n in args.baseline_workers.split(",")]
    else:
        runs = [(int(p),) for p in args.processes.split(",")]
    for count, *extra in runs:
        results["cycles"].append(cycle(tree, now, count, args.users, args.per_user, *extra))
        print(tree.label, json.dumps(results["cycles"][-1]), flush=True)
    if not baseline and not args.no_kill:
        results["killed"] = killed(tree, now, args.users, args.per_user, args.lease)
        print(tree.label, json.dumps(results["killed"]), flush=True)
        results["claim_cost"] = claim_cost(tree)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--per-user", type=int, default=5)
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision; '' skips")
    parser.add_argument("--baseline-workers", default="1,2")
    parser.add_argument("--skip-current", action="store_true")
    parser.add_argument("--no-kill", action="store_true")
    parser.add_argument("--lease", type=int, default=5)
    parser.add_argument("--tag", default="")
    parser.add_argument("--json", default=str(ROOT / "bench/history/cycle.json"))
    parser.add_argument("--claim-cost-only", action="store_true")
    args = parser.parse_args()
    if args.claim_cost_only:  # on the database a full run left
        print(json.dumps(claim_cost(Tree("current", ROOT, args.tag))), flush=True)
        return
    target = Path(args.json)

    def save(label: str, figures: dict) -> None:
        """Merge into the JSON file, so separate runs add up."""
        merged = json.loads(target.read_text()) if target.exists() else {}
        merged = {k: v for k, v in merged.items() if k.startswith(("baseline", "current"))}
        merged[label] = figures
        target.write_text(json.dumps(merged, indent=1))

    if args.baseline:
        with baseline_tree(args.baseline, args.tag) as tree:
            save(f"baseline {args.baseline}", measure(tree, args, baseline=True))
    if not args.skip_current:
        head = subprocess.run(
            [GIT, "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        save(f"current {head}", measure(Tree("current", ROOT, args.tag), args, baseline=False))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
