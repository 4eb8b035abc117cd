"""Calendar sync at real scale, against fakes that throttle as providers do, side by side.

``python -m bench.sync_scale [--baseline REV] [--sittings 3] [--only one_host,mixed]
[--json PATH] [--tag SUFFIX]``

One ``manage.py materialize`` process, as cron runs it, default settings, every
answer after 300 ms (the fakes of tests/fakes, in this process, shared by both
versions). Each calendar holds 5 events in the next 2.5 hours, each with a
reminder of its own. Per sitting, each version (this checkout and the baseline
commit, cloned apart as ``bench.sidebyside`` does) gets a fresh database,
seeded through its own ORM and analysed, then one run; the versions alternate
within the sitting, so both meet the same load of this shared machine.

* **one_host** — 600 ICS feeds on one host.
* **mixed** — 1,500 users: 500 Google (30 % with an expired access token,
  refreshed at the token endpoint; a sliding-minute project quota and a per-user
  one, answered 403 ``rateLimitExceeded``), 500 Graph (throttled above 40
  requests a second app-wide and per mailbox, 429 + ``Retry-After: 2``), 500 ICS
  on three hosts (60 % on one).

Figures per run: users/s from the run's summary line, users with no nudge
queued, Graph's share of 429s, Google's 403s, token refreshes per expired token.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from bench.calendar_sync import KEY, SEED, _analyze, _env, _materialize
from bench.sidebyside import ADMIN_URL, ROOT, Tree, baseline_tree
from tests.fakes import base as fake_base
from tests.fakes import google_server, microsoft_server
from tests.fakes.base import Quota
from tests.fakes.google_server import FakeGoogle, google_event
from tests.fakes.ics_server import FakeIcsFeed
from tests.fakes.microsoft_server import FakeGraph, graph_event

# Up to 64 connections arrive at once; the fakes' default listen backlog is 5.
fake_base._Server.request_queue_size = 256

DEFAULT_BASELINE = "af04e2a"
LATENCY = 0.3
TAG = "_scale"
WORKLOADS = ("one_host", "mixed")
REMINDERS = (10, 15, 20, 5, 30)  # minutes, one per event
GOOGLE_EVENTS = re.compile(r"/events$")
GRAPH_VIEW = re.compile(r"/calendarView$")


def _starts(now: datetime) -> list[datetime]:
    return [now + timedelta(minutes=30 * (i + 1)) for i in range(len(REMINDERS))]


def _ics_body(now: datetime) -> str:
    stamp = "%Y%m%dT%H%M%SZ"
    events = "".join(
        f"BEGIN:VEVENT\r\nUID:meeting-{i}@example.com\r\nDTSTART:{start:{stamp}}\r\n"
        f"DTEND:{start + timedelta(minutes=25):{stamp}}\r\nSUMMARY:Meeting {i}\r\n"
        f"BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT{REMINDERS[i]}M\r\nEND:VALARM\r\n"
        "END:VEVENT\r\n"
        for i, start in enumerate(_starts(now))
    )
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\n{events}END:VCALENDAR\r\n"


def _google(now: datetime) -> FakeGoogle:
    fake = FakeGoogle()
    fake.api_latency = LATENCY
    fake.events["primary"] = [
        google_event(
            f"meeting-{i}",
            start,
            start + timedelta(minutes=25),
            reminders={"useDefault": False, "overrides": [{"method": "popup", "minutes": m}]},
        )
        for i, (start, m) in enumerate(zip(_starts(now), REMINDERS, strict=True))
    ]
    fake.quotas = [
        # Google's defaults: a project's minute, and a user's.
        Quota(limit=10_000, window=60.0, retry_after=5, status=403, paths=GOOGLE_EVENTS),
        Quota(
            limit=600, window=60.0, retry_after=5, status=403, paths=GOOGLE_EVENTS,
            per_caller=True, reason="userRateLimitExceeded",
        ),
    ]  # fmt: skip
    return fake


def _graph(now: datetime) -> FakeGraph:
    fake = FakeGraph()
    fake.api_latency = LATENCY
    fake.events = [
        graph_event(f"meeting-{i}", start, start + timedelta(minutes=25), reminder=m)
        for i, (start, m) in enumerate(zip(_starts(now), REMINDERS, strict=True))
    ]
    fake.quotas = [
        Quota(limit=40, window=1.0, retry_after=2, paths=GRAPH_VIEW),
        Quota(limit=4, window=1.0, retry_after=2, paths=GRAPH_VIEW, per_caller=True),
    ]
    return fake


def _oauth_specs(provider: str, fake: Any, count: int, now: datetime, expired: int) -> list:
    module = google_server if provider == "google" else microsoft_server
    specs = []
    for i in range(count):
        access, refresh = fake.issue_tokens()
        expires = now - timedelta(hours=1) if i < expired else now + timedelta(hours=2)
        specs.append(
            {"provider": provider, "account": module.ACCOUNT,
             "calendar_id": "primary" if provider == "google" else "",
             "access": access, "refresh": refresh, "feed_url": "",
             "expires": expires.isoformat()}
        )  # fmt: skip
    return specs


def _ics_specs(hosts: list[FakeIcsFeed], counts: list[int]) -> list:
    return [
        {"provider": "ics", "account": "feed", "calendar_id": "", "access": "", "refresh": "",
         "feed_url": host.feed_url, "expires": ""}
        for host, count in zip(hosts, counts, strict=True)
        for _ in range(count)
    ]  # fmt: skip


def _interleave(*groups: list) -> list:
    """One of each in turn, so the users of every provider are spread over the run."""
    out = []
    for i in range(max(len(g) for g in groups)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def _queued(tree: Tree) -> dict[str, int]:
    with psycopg.connect(ADMIN_URL, dbname=tree.database) as admin:
        users, rows = admin.execute(
            "SELECT count(DISTINCT user_id), count(*) FROM scheduled_sends"
        ).fetchone()
        seeded = admin.execute("SELECT count(*) FROM calendar_connections").fetchone()[0]
    return {"users_with_nudges": users, "queue_rows": rows, "connections": seeded}


def sitting(tree: Tree, workload: str) -> dict[str, Any]:
    """One fresh database, seeded, analysed, and one materialize run, with fresh fakes."""
    tree.fresh_database()
    now = tree.database_now()
    with ExitStack() as stack:
        hosts = [
            stack.enter_context(FakeIcsFeed()) for _ in range(1 if workload == "one_host" else 3)
        ]
        for host in hosts:
            host.body, host.latency = _ics_body(now), LATENCY
        if workload == "one_host":
            specs, env = _ics_specs(hosts, [600]), {"CALENDAR_TOKEN_KEYS": KEY}
            google = graph = None
        else:
            google = stack.enter_context(_google(now))
            graph = stack.enter_context(_graph(now))
            google_specs = _oauth_specs("google", google, 500, now, expired=150)
            expired = {s["refresh"] for s in google_specs[:150]}
            specs = _interleave(
                google_specs,
                _oauth_specs("microsoft", graph, 500, now, expired=0),
                _ics_specs(hosts, [300, 100, 100]),
            )
            env = {**_env("google", [google]), **_env("microsoft", [graph])}
        seed_file = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "seed.json"
        seed_file.write_text(json.dumps(specs))
        tree.run("shell", "-c", SEED, CSB_SEED_FILE=str(seed_file), **env)
        _analyze(tree)
        figures = {"workload": workload, **_materialize(tree, now, env), **_queued(tree)}
        figures["most_in_flight_per_host"] = [h.max_in_flight for h in hosts]
        if graph is not None:
            calls = graph.view_calls()
            refused = sum(1 for c in calls if c.outcome == "rate-limited")
            figures["graph_requests"] = len(calls)
            figures["graph_share_429"] = round(refused / len(calls), 4) if calls else 0.0
        if google is not None:
            calls = google.events_calls()
            figures["google_requests"] = len(calls)
            figures["google_403"] = sum(1 for c in calls if c.outcome == "rate-limited")
            used = Counter(c.params.get("refresh_token") for c in google.token_calls())
            figures["expired_refreshed_once"] = sum(1 for r in expired if used[r] == 1)
            figures["expired_tokens"] = len(expired)
            figures["refreshes_of_unexpired"] = sum(n for r, n in used.items() if r not in expired)
    return figures


def _free_connections() -> int:
    with psycopg.connect(ADMIN_URL) as admin:
        most = int(admin.execute("SHOW max_connections").fetchone()[0])
        used = admin.execute("SELECT count(*) FROM pg_stat_activity").fetchone()[0]
    return most - used


def steady_sitting(tree: Tree, workload: str, need: int = 80, tries: int = 4) -> dict[str, Any]:
    """``sitting``, once the shared server has ``need`` connections free (a run holds
    one per fetch thread and lane); again when another program took them meanwhile."""
    for attempt in range(1, tries + 1):
        waited = time.monotonic()
        while _free_connections() < need and time.monotonic() - waited < 600:
            time.sleep(2)
        try:
            figures = sitting(tree, workload)
        except RuntimeError as exc:
            if "connection slots" not in str(exc) or attempt == tries:
                raise
            print(f"{tree.label}: the server ran out of connections; again", flush=True)
            continue
        return {**figures, "waited_for_connections_s": round(time.monotonic() - waited, 1)}
    raise AssertionError("unreachable")


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--only", default="", help=f"comma-separated subset of {WORKLOADS}")
    parser.add_argument("--json", type=Path, default=ROOT / "bench/history/sync_scale.json")
    parser.add_argument("--tag", default="", help="suffix of the databases' names")
    args = parser.parse_args()
    only = [w for w in args.only.split(",") if w] or list(WORKLOADS)
    results: dict[str, Any] = {"baseline": args.baseline, "latency_seconds": LATENCY, "runs": []}
    tag = TAG + args.tag
    with baseline_tree(args.baseline, tag) as baseline:
        trees = [baseline, Tree("current", ROOT, tag)]
        for workload in only:
            for number in range(1, args.sittings + 1):
                for tree in trees:
                    figures = {
                        "version": tree.label,
                        "sitting": number,
                        **steady_sitting(tree, workload),
                    }
                    print(json.dumps(figures), flush=True)
                    results["runs"].append(figures)
                    args.json.write_text(json.dumps(results, indent=1) + "\n")
    summary: dict[str, Any] = {}
    for workload in only:
        for tree in trees:
            runs = [
                r
                for r in results["runs"]
                if (r["workload"], r["version"]) == (workload, tree.label)
            ]
            summary[f"{workload}/{tree.label}"] = {
                key: _spread([r[key] for r in runs])
                for key in ("users_per_second", "users_with_nudges", "graph_share_429")
                if all(key in r for r in runs)
            }
    results["summary"] = summary
    print(json.dumps(summary, indent=1))
    args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
