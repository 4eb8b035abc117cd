"""Issue 35: a cold fill that syncs every calendar, side by side with a baseline.

``python -m bench.cold_fill_sync [--users 2000,10000] [--processes 2] [--sittings 3]
[--baseline REV] [--current REV] [--tag T] [--json PATH]``

Per sitting, per version (the baseline commit, then the current one, each in a
temporary worktree and its own freshly migrated database), per size: N users,
each with one calendar — 40 % Google (one in ten of those with an access token
already expired, so refreshed first; one in a hundred with a revoked refresh
token, so marked for re-authorisation), 40 % Graph, 20 % ICS feeds over eight
fake hosts — every provider answering each request after 300 ms (the fakes of
tests/fakes, in this process), five meetings with a 10-minute reminder in the
next three hours per calendar. Seeded set-based through the version's own ORM
templates (``bench.data.replicate``), then ``ANALYZE``. Then ``--processes``
``manage.py materialize --now T`` (no ``--no-sync``: every calendar fetched;
``--concurrency`` sets ``CALENDAR_SYNC_CONCURRENCY``, ``--baseline-concurrency``
the baseline's)
started at once, each in its own process group, as cron starts them on one
line; an ``ANALYZE scheduled_sends`` thread every 60 s (autovacuum is off).
Measured: wall time to the last exit, provider requests, the most database
sessions the processes held at once, and the fill checked —
every user with a working calendar queued its five nudges, no duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.calendar_sync import KEY, SlowGoogle, SlowGraph, _env
from bench.cold_fill import admin, run_processes
from bench.pacing import current_tree
from bench.sidebyside import ROOT, Tree, baseline_tree
from tests.fakes import base as fake_base
from tests.fakes.google_server import google_event
from tests.fakes.ics_server import FakeIcsFeed
from tests.fakes.microsoft_server import graph_event

fake_base._Server.request_queue_size = 1024
DEFAULT_BASELINE = "af04e2a"
LATENCY = 0.3
ICS_HOSTS = 8
MEETINGS = 5
SCRIPT = Path(__file__).with_name("cold_fill_sync_seed.py")


def _meetings(now: datetime) -> list[datetime]:
    first = (now + timedelta(minutes=40)).replace(second=0, microsecond=0)
    return [first + timedelta(minutes=30 * k) for k in range(MEETINGS)]


def _ics_body(starts: list[datetime]) -> str:
    stamp = "%Y%m%dT%H%M%SZ"
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//bench//EN"]
    for k, start in enumerate(starts):
        lines += [
            "BEGIN:VEVENT",
            f"UID:m{k}@example.com",
            f"DTSTAMP:{start:{stamp}}",
            f"DTSTART:{start:{stamp}}",
            f"DTEND:{start + timedelta(minutes=30):{stamp}}",
            f"SUMMARY:Meeting {k}",
            "BEGIN:VALARM",
            "ACTION:DISPLAY",
            "TRIGGER:-PT10M",
            "END:VALARM",
            "END:VEVENT",
        ]
    return "\r\n".join([*lines, "END:VCALENDAR", ""])


def fill(tree: Tree, users: int, processes: int, concurrency: int) -> dict[str, Any]:
    """One fresh database, ``users`` seeded, one cold fill by ``processes`` processes."""
    with ExitStack() as stack:
        google = stack.enter_context(SlowGoogle())
        graph = stack.enter_context(SlowGraph())
        feeds = [stack.enter_context(FakeIcsFeed()) for _ in range(ICS_HOSTS)]
        tree.fresh_database()
        now = tree.database_now()
        starts = _meetings(now)
        reminders = {"useDefault": False, "overrides": [{"method": "popup", "minutes": 10}]}
        google.events["primary"] = [
            google_event(f"m{k}", s, s + timedelta(minutes=30), reminders=reminders)
            for k, s in enumerate(starts)
        ]
        graph.events = [
            graph_event(f"m{k}", s, s + timedelta(minutes=30), reminder=10)
            for k, s in enumerate(starts)
        ]
        for feed in feeds:
            feed.body, feed.latency = _ics_body(starts), LATENCY
        g_access, g_refresh = google.issue_tokens()
        m_access, m_refresh = graph.issue_tokens()
        env = {**_env("google", [google]), **_env("microsoft", [graph]), "CALENDAR_TOKEN_KEYS": KEY}
        if concurrency:
            env["CALENDAR_SYNC_CONCURRENCY"] = str(concurrency)
        spec = {
            "users": users,
            "now": now.isoformat(),
            "google": [g_access, g_refresh],
            "graph": [m_access, m_refresh],
            "feeds": [feed.feed_url for feed in feeds],
        }
        started = time.monotonic()
        counts = json.loads(
            tree.run("shell", "-c", SCRIPT.read_text(), CFS_SEED=json.dumps(spec), **env)
            .strip()
            .splitlines()[-1]
        )
        with admin(tree) as db:
            db.execute("ANALYZE")
        seeded = round(time.monotonic() - started, 1)
        fakes = [google, graph, *feeds]
        before = sum(len(f.requests) for f in fakes)
        with counting_sessions(tree) as sessions:
            result = run_processes(tree, now.isoformat(), processes, sync=True, **env)
        result["provider_requests"] = sum(len(f.requests) for f in fakes) - before
    result.update(users=users, processes=processes, seed_s=seeded, connections=counts)
    result["sync_concurrency"] = concurrency or "default"
    result["most_database_sessions"] = sessions[0]
    result.update(check(tree, users - counts["google_revoked"]))
    result["users_per_s"] = round(users / result["wall_s"], 1)
    return result


@contextmanager
def counting_sessions(tree: Tree) -> Iterator[list[int]]:
    """The most sessions the version's database had at once while the block ran
    (sampled every 0.5 s): what the processes ask of the server's ``max_connections``."""
    most = [0]
    stop = threading.Event()

    def sample() -> None:
        with admin(tree) as db:
            while not stop.wait(0.5):
                count = db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (tree.database,)
                ).fetchone()[0]
                most[0] = max(most[0], count - 1)  # not this sampler's own

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield most
    finally:
        stop.set()
        thread.join()


def check(tree: Tree, working_users: int) -> dict[str, Any]:
    """Every user with a working calendar has its five nudges; no duplicate key."""
    with admin(tree) as db:
        rows, keys = db.execute(
            "SELECT count(*), count(DISTINCT (user_id, kind, ref_id, intended_at)) "
            "FROM scheduled_sends"
        ).fetchone()
        whole = db.execute(
            "SELECT count(*) FROM (SELECT user_id FROM scheduled_sends GROUP BY user_id "
            "HAVING count(*) = %s) AS w",
            (MEETINGS,),
        ).fetchone()[0]
        reauth = db.execute(
            "SELECT count(*) FROM calendar_connections WHERE status = 'needs_reauth'"
        ).fetchone()[0]
    return {
        "rows": rows,
        "rows_expected": working_users * MEETINGS,
        "duplicates": rows - keys,
        "users_with_all_rows": whole,
        "needs_reauth": reauth,
        "ok": rows == working_users * MEETINGS and rows == keys and whole == working_users,
    }


def summary(sittings: list[dict]) -> dict:
    out: dict = {}
    for label in ("baseline", "current"):
        for runs in zip(*(s[label] for s in sittings), strict=True):
            walls = sorted(r["wall_s"] for r in runs)
            rates = sorted(r["users_per_s"] for r in runs)
            out.setdefault(label, {})[str(runs[0]["users"])] = {
                "wall_s": [walls[0], statistics.median(walls), walls[-1]],
                "users_per_s": [rates[0], statistics.median(rates), rates[-1]],
                "all_ok": all(r["ok"] for r in runs),
                "sittings": len(runs),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_fill_sync", description=__doc__)
    parser.add_argument("--users", default="2000,10000")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=0, help="CALENDAR_SYNC_CONCURRENCY; 0: the default"
    )
    parser.add_argument(
        "--baseline-concurrency",
        type=int,
        default=-1,
        help="the baseline's, when it differs (a baseline holding a session per fetch "
        "cannot run two processes at the default); -1: as --concurrency",
    )
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--current", default="", help="a commit to run instead of this checkout")
    parser.add_argument("--tag", default="_cfsync")
    parser.add_argument("--json", default=str(ROOT / "bench/history/cold_fill_sync.json"))
    args = parser.parse_args()
    sizes = [int(n) for n in args.users.split(",")]
    target = Path(args.json)
    results: dict = {"args": vars(args), "sittings": []}
    with (
        baseline_tree(args.baseline, args.tag) as baseline,
        current_tree(args.current, args.tag) as current,
    ):
        for number in range(args.sittings):
            one: dict = {}
            for tree in (baseline, current):
                one[tree.label] = []
                concurrency = args.concurrency
                if tree is baseline and args.baseline_concurrency >= 0:
                    concurrency = args.baseline_concurrency
                for users in sizes:
                    figures = fill(tree, users, args.processes, concurrency)
                    one[tree.label].append(figures)
                    print(
                        f"sitting {number + 1} {tree.label} {users}: {figures['wall_s']} s, "
                        f"ok {figures['ok']}, load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
            results["sittings"].append(one)
            results["summary"] = summary(results["sittings"])
            target.write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps(results["summary"], indent=1))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
