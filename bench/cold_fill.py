"""Issue 25, item 2: a cold fill of the queue, and the steady cycle after it, side by side.

``python -m bench.cold_fill [--users 20000,50000] [--per-user 20] [--baseline e367e4e]
[--baseline-users 20000] [--json PATH] [--tag T]``

Per version (the baseline commit in a temporary git worktree, then this
checkout; never both at once) and per size: a fresh database seeded with N
users x ``--per-user`` follow-ups whose due instants are spread evenly over
the look-ahead (each user's own spread out, users interleaved), written
set-based through the version's own ORM templates (``bench.data.replicate``:
one ``INSERT … SELECT generate_series`` per table, copying a row the ORM
made), then ``ANALYZE``. Then, the queue emptied each time (the queue and the
cycle tables the version has):

* the cold fill with one ``manage.py materialize --now T --no-sync``;
* the cold fill with two: this checkout as two independent processes, each
  in its own process group (as two machines would run it); the baseline,
  where a second process stands aside on the advisory lock, as one process
  with ``--workers 2`` (its own forks, the fair comparison on one machine);
* the steady cycle: one process again at T + 15 minutes on the filled queue.

Every fill is checked: rows == users x per-user, no duplicate key, every user
with all their rows. The server runs with autovacuum off: during each run a
thread runs ``ANALYZE scheduled_sends`` every 60 s (what autovacuum's analyze
would do in a deployment, naptime 1 min); each fill starts after an ANALYZE of the
emptied queue, and the steady cycle after one of the filled queue, so no figure depends on
whether a fill ended just before or just after a tick.
The run budget is raised (``NUDGE_MATERIALIZE_BUDGET_SECONDS``) so a slow fill is
measured whole, not cut short; ``cut_short`` says whether the default 780 s would have cut it.
Load averages (``os.getloadavg``, what ``uptime`` prints) before and after
each run. Writes JSON; BENCHMARKS.md's section is written from it by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import psycopg

from bench.sidebyside import ADMIN_URL, GIT, Tree, baseline_tree

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "e367e4e"
QUEUE_TABLES = ("scheduled_sends", "materialize_slices", "materialize_cycles", "sweep_runs")
BUDGET = "7200"  # seconds: measure a slow fill whole
DEFAULT_BUDGET = 780
ANALYZE_EVERY = 60.0

# Set-based seeding through the version's own ORM: one template row per table
# made by the ORM, copied by ``bench.data.replicate`` (present in both versions).
SEED = """
import json, os
from datetime import datetime
from bench import data
try:
    from followups.models import FollowUp
except ImportError:  # a baseline from before follow-ups had a room of their own
    from calendars.models import FollowUp
try:
    from accounts.models import DeliverySettings
except ImportError:  # a baseline from before accounts owned it
    from scheduled_sends.models import DeliverySettings
from tenancy.scope import support_scope
spec = json.loads(os.environ["COLD_SEED"])
ids = data.make_users(spec["users"], spec["prefix"])
with support_scope():
    settings = DeliverySettings.objects.create(
        user_id=ids[0], channel=spec["channel"], default_lead_minutes=10,
        telegram_chat_id=str(spec["chat_base"] + ids[0]),
    )
    data.replicate(
        DeliverySettings, settings.pk,
        overrides={"user_id": "u", "telegram_chat_id": "(%(base)s + u)::text"},
        source="unnest(%(ids)s::bigint[]) AS u",
        params={"ids": ids[1:], "base": spec["chat_base"]},
    )
    template = FollowUp.objects.create(
        user_id=ids[0], title="template", due_at=datetime.fromisoformat(spec["due_at"])
    )
    # Row g belongs to user g mod N, its (g div N)-th follow-up; due instants
    # evenly spread over the whole span, so users' follow-ups interleave.
    data.replicate(
        FollowUp, template.pk,
        overrides={
            "user_id": "(%(ids)s::bigint[])[1 + mod(g, %(users)s)]",
            "title": "%(prefix)s || mod(g, %(users)s) || '-' || g / %(users)s",
            "due_at": "%(first)s::timestamptz + make_interval(secs => "
                      "%(spread)s::float8 * g / (%(users)s * %(per_user)s))",
        },
        source="generate_series(0, %(users)s * %(per_user)s - 1) AS g",
        params={
            "ids": ids, "users": len(ids), "per_user": spec["per_user"],
            "prefix": spec["prefix"], "first": spec["due_at"], "spread": spec["spread_seconds"],
        },
    )
    template.delete()
print(len(ids))
"""


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def admin(tree: Tree):
    return psycopg.connect(ADMIN_URL, dbname=tree.database, autocommit=True)


def seed(
    tree: Tree, users: int, per_user: int, first: datetime, spread_seconds: int = 9000
) -> float:
    """Seed and ANALYZE; seconds taken."""
    started = time.monotonic()
    spec = {
        "prefix": "cf",
        "users": users,
        "per_user": per_user,
        "due_at": first.isoformat(),
        "spread_seconds": spread_seconds,
        "channel": "telegram",
        "chat_base": 1_000_000,
    }
    tree.run("shell", "-c", SEED, COLD_SEED=json.dumps(spec))
    with admin(tree) as db:
        db.execute("ANALYZE")
    return round(time.monotonic() - started, 1)


def queue_tables(tree: Tree) -> list[str]:
    with admin(tree) as db:
        present = {
            r[0]
            for r in db.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename = ANY(%s)",
                (list(QUEUE_TABLES),),
            )
        }
    return [t for t in QUEUE_TABLES if t in present]


def reset(tree: Tree) -> None:
    """Empty the queue and the cycle tables (those this version has), and ANALYZE the empty
    queue: every fill starts from a cold start's statistics, not from the last fill's."""
    with admin(tree) as db:
        db.execute(f"TRUNCATE {', '.join(queue_tables(tree))}")
        db.execute("ANALYZE scheduled_sends")


@contextmanager
def analyzing(tree: Tree, every: float = ANALYZE_EVERY):
    """``ANALYZE scheduled_sends`` every ``every`` seconds while the block runs."""
    stop = threading.Event()
    runs: list[float] = []

    def loop() -> None:
        with admin(tree) as db:
            while not stop.wait(every):
                started = time.monotonic()
                db.execute("ANALYZE scheduled_sends")
                runs.append(round(time.monotonic() - started, 2))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield runs
    finally:
        stop.set()
        thread.join()


def start(tree: Tree, now: str, *args: str, sync: bool = False, **env: str) -> subprocess.Popen:
    """One ``materialize`` (``--no-sync`` unless ``sync``), in its own process group."""
    return subprocess.Popen(
        tree.command("materialize", "--now", now, *([] if sync else ["--no-sync"]), *args),
        cwd=tree.path,
        env=tree.env(NUDGE_MATERIALIZE_BUDGET_SECONDS=BUDGET, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like another machine's
    )


def run_processes(
    tree: Tree, now: str, processes: int, *args: str, sync: bool = False, **env: str
) -> dict:
    """``processes`` materialize processes started at once; wall time to the last exit."""
    before = load()
    with analyzing(tree) as analyzes:
        started = time.monotonic()
        running = [start(tree, now, *args, sync=sync, **env) for _ in range(processes)]
        summaries = []
        for process in running:
            out, err = process.communicate()
            if process.returncode:
                raise RuntimeError(f"{tree.label}: materialize failed:\n{out}\n{err[-3000:]}")
            summaries.append(out.strip().splitlines()[-1] if out.strip() else "")
        wall = time.monotonic() - started
    run_seconds = [float(m[1]) for s in summaries if (m := re.search(r" in ([0-9.]+)s", s))]
    return {
        "wall_s": round(wall, 1),
        "run_s": run_seconds,
        "cut_short_by_default_budget": max(run_seconds or [0]) > DEFAULT_BUDGET,
        "summaries": summaries,
        "analyze_s": analyzes,
        "load_before": before,
        "load_after": load(),
    }


def check(tree: Tree, users: int, per_user: int) -> dict:
    """Rows against users x per-user; duplicate keys; users with all their rows."""
    with admin(tree) as db:
        rows, keys = db.execute(
            "SELECT count(*), count(DISTINCT (user_id, kind, ref_id, intended_at)) "
            "FROM scheduled_sends"
        ).fetchone()
        whole = db.execute(
            "SELECT count(*) FROM (SELECT user_id FROM scheduled_sends GROUP BY user_id "
            "HAVING count(*) = %s) AS w",
            (per_user,),
        ).fetchone()[0]
    return {
        "rows": rows,
        "rows_expected": users * per_user,
        "duplicates": rows - keys,
        "users_with_all_rows": whole,
        "ok": rows == users * per_user and rows == keys and whole == users,
    }


def fill(tree: Tree, now: str, users: int, per_user: int, processes: int, *args: str) -> dict:
    reset(tree)
    result = {"processes": processes, "args": list(args)}
    result.update(run_processes(tree, now, processes, *args))
    result.update(check(tree, users, per_user))
    wall = result["wall_s"]
    result["users_per_s"] = round(users / wall, 1)
    result["rows_per_s"] = round(result["rows"] / wall, 1)
    result["fill_100k_min"] = round(100_000 / (users / wall) / 60, 1)
    print(f"    {tree.label} {users} fill x{processes} {' '.join(args)}: {wall:.1f}s", flush=True)
    return result


def _has_fork_pool(tree: Tree) -> bool:
    """Whether that version's materialize still had ``--workers`` (gone in round 4)."""
    commands = tree.path.glob("*/management/commands/materialize.py")
    return any("--workers" in command.read_text() for command in commands)


def measure(tree: Tree, users: int, per_user: int, baseline: bool) -> dict:
    """Seed, fill with 1 and 2, then the steady cycle at T + 15 min."""
    tree.fresh_database()
    db_now = tree.database_now()
    result: dict = {"users": users, "per_user": per_user, "load_before_seed": load()}
    result["seed_s"] = seed(tree, users, per_user, db_now + timedelta(minutes=20))
    now = db_now.isoformat()
    result["tables_emptied"] = queue_tables(tree)
    result["fill_1"] = fill(tree, now, users, per_user, 1)
    if baseline and _has_fork_pool(tree):
        result["fill_2"] = fill(tree, now, users, per_user, 1, "--workers", "2")
    else:
        result["fill_2"] = fill(tree, now, users, per_user, 2)
    later = (db_now + timedelta(minutes=15)).isoformat()
    # Autovacuum analyzes a table that just took 400,000 rows within its naptime, long
    # before the next cycle 15 minutes on: so does the bench, whichever fill was last.
    with admin(tree) as db:
        started = time.monotonic()
        db.execute("ANALYZE scheduled_sends")
        result["analyze_before_steady_s"] = round(time.monotonic() - started, 2)
    steady = run_processes(tree, later, 1)
    with admin(tree) as db:
        steady["rows_after"] = db.execute("SELECT count(*) FROM scheduled_sends").fetchone()[0]
    steady["cycle_100k_min"] = round(100_000 / (users / steady["wall_s"]) / 60, 2)
    result["steady"] = steady
    print(f"    {tree.label} {users} steady: {steady['wall_s']:.1f}s", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="20000,50000", help="sizes for this checkout")
    parser.add_argument("--baseline-users", default="20000", help="sizes for the baseline")
    parser.add_argument("--per-user", type=int, default=20)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision; '' skips")
    parser.add_argument("--skip-current", action="store_true")
    parser.add_argument("--tag", default="")
    parser.add_argument("--json", default=str(ROOT / "bench/history/cold_fill.json"))
    args = parser.parse_args()
    target = Path(args.json)

    def save(label: str, figures: list) -> None:
        """Merge into the JSON file, so separate runs add up."""
        merged = json.loads(target.read_text()) if target.exists() else {}
        merged[label] = figures
        target.write_text(json.dumps(merged, indent=1))

    sizes = [int(n) for n in args.baseline_users.split(",") if n]
    if args.baseline and sizes:
        with baseline_tree(args.baseline, args.tag) as tree:
            figures = []
            for users in sizes:
                figures.append(measure(tree, users, args.per_user, baseline=True))
                save(f"baseline {args.baseline}", figures)
    if not args.skip_current:
        head = subprocess.run(
            [GIT, "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        tree = Tree("current", ROOT, args.tag)
        figures = []
        for users in (int(n) for n in args.users.split(",") if n):
            figures.append(measure(tree, users, args.per_user, baseline=False))
            save(f"current {head}", figures)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
