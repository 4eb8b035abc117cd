"""Adaptive pacing (issue 20), side by side with a baseline commit.

``python -m bench.pacing [--baseline REV] [--current REV] [--only burst,calendar] [--tag T]
[--json PATH] [--latency 0.05-0.15] [--sittings 3]``

Two workloads, each version in its own database on one PostgreSQL server
(``NUDGE_BENCH_ADMIN_URL``) and driven only through its own ``manage.py``,
exactly as ``bench.sidebyside`` does (its ``Tree`` and ``rate`` workload are
reused):

* **burst** — 2,400 nudges meant for one minute, a fake Telegram allowing
  10/s (429 + ``retry_after`` above it), ``NUDGE_TELEGRAM_RATE=10``: the rate
  configured *at* the provider's limit. ``deliver`` started every minute as
  cron starts it — whether or not the previous minute's run has ended; about
  11 real minutes, both versions at once.
* **calendar** — many Google connections synced at once from a thread pool
  (``sync_user_connections`` per user, as a concurrent sweep would call it),
  against a fake Google answering in 300 ms that refuses more than its quota
  a second with 429 + ``Retry-After``, with the project rate configured at
  exactly that quota. The versions run one after the other, each with a fresh
  fake.

Figures are printed and written as JSON (``bench/history/pacing.json``), with every
deliver run's summary line per version (read back from ``sweep_runs``), so a
late tail can be traced to the minute that carried less than planned.
``--current REV`` checks a commit out in a temporary worktree instead of
running this checkout (so the checkout can change while the bench runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from bench.sidebyside import (
    ADMIN_URL,
    LEAD,
    ROOT,
    Tree,
    _lateness,
    _percentile,
    _seed_group,
    _summary,
    _telegram_env,
    baseline_tree,
)
from tests.fakes import google_server
from tests.fakes.base import Answer, Quota
from tests.fakes.google_server import FakeGoogle, google_event
from tests.fakes.telegram_server import FakeTelegram

DEFAULT_BASELINE = "25ad87f"
WORKLOADS = ("burst", "calendar")
EVENTS = re.compile(r"/events$")
# A Fernet key for the bench's throw-away database only.
TOKEN_KEY = "bXFpYmVuY2gtcGFjaW5nLWtleS0wMDAwMDAwMDAwMDA="  # noqa: S105

# Creates ``len(tokens)`` users, each with one Google connection, through the
# version's own ORM and scopes, then syncs them from a thread pool; prints the outcomes.
CALENDAR_SCRIPT = """
import inspect, json, os, time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
try:
    from providers import crypto
except ImportError:  # a baseline from before the providers had a room of their own
    from calendars import crypto
from calendars.models import CalendarConnection
from calendars.sync_pool import sync_user_connections
from core.config import NudgeConfig
from accounts.models import DeliverySettings
from tenancy.scope import tenant_scope
spec = json.loads(os.environ["SBS_CAL"])
User = get_user_model()
now = timezone.now()
users = User.objects.bulk_create(
    [User(username=f"cal{i}") for i in range(len(spec["tokens"]))], batch_size=2000
)
for user, (access, refresh) in zip(users, spec["tokens"]):
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(user=user, channel="console", default_lead_minutes=10)
        CalendarConnection.objects.create(
            user=user, provider="google", account="someone@example.com",
            access_token_encrypted=crypto.encrypt(access),
            refresh_token_encrypted=crypto.encrypt(refresh),
            token_expires_at=now + timedelta(hours=1),
        )
# A baseline from before the pool synced over the subjects' window itself is given it.
window = {}
if "window_start" in inspect.signature(sync_user_connections).parameters:
    start, end = NudgeConfig.from_settings().subject_window(now)
    window = {"window_start": start, "window_end": end}
def one(user_id):
    try:
        summary = sync_user_connections(
            user_id, now=now, config=NudgeConfig.from_settings(), **window
        )
        return [[r.outcome, r.message] for r in summary.results]
    finally:
        connection.close()
started = time.monotonic()
with ThreadPoolExecutor(spec["threads"]) as pool:
    results = [r for rs in pool.map(one, [u.pk for u in users]) for r in rs]
print("SBS_RESULT " + json.dumps({"seconds": time.monotonic() - started, "results": results}))
"""


class SlowGoogle(FakeGoogle):
    """The fake Google, answering every API call after a round trip."""

    def __init__(self, latency: float) -> None:
        super().__init__()
        self.latency = latency

    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        answer = super().answer(method, path, headers, body)
        return Answer(answer.status, answer.body, answer.headers, self.latency)


def calendar(
    tree: Tree, connections: int, threads: int, quota: int, latency: float, configured: float
) -> dict:
    """``connections`` Google connections synced by ``threads`` threads at once against a
    fake allowing ``quota`` requests a second; the project rate configured at ``configured``/s."""
    tree.fresh_database()
    with SlowGoogle(latency) as fake:
        fake.events["primary"] = [
            google_event("standup", *_today_at(9), summary="Standup"),
        ]
        fake.quota = Quota(limit=quota, window=1.0, retry_after=1, paths=EVENTS)
        tokens = [fake.issue_tokens() for _ in range(connections)]
        out = tree.run(
            "shell",
            "-c",
            CALENDAR_SCRIPT,
            SBS_CAL=json.dumps({"tokens": tokens, "threads": threads}),
            CALENDAR_TOKEN_KEYS=TOKEN_KEY,
            GOOGLE_CLIENT_ID=google_server.CLIENT_ID,
            GOOGLE_CLIENT_SECRET=google_server.CLIENT_SECRET,
            GOOGLE_TOKEN_URL=fake.token_url,
            GOOGLE_API_BASE_URL=fake.api_base_url,
            CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE=str(configured * 60),
            # This fake counts a sliding second, not Google's minute: nothing to burst into.
            CALENDAR_GOOGLE_PROJECT_BURST="0",
            # The per-user budget is not what this measures.
            CALENDAR_GOOGLE_USER_RATE_PER_MINUTE="6000",
        )
        result = json.loads(out.split("SBS_RESULT ", 1)[1])
        calls = fake.events_calls()
    outcomes = [r[0] for r in result["results"]]
    refused = sum(1 for c in calls if c.outcome == "rate-limited")
    return {
        "connections": connections,
        "threads": threads,
        "quota_per_s": quota,
        "configured_per_s": configured,
        "provider_latency_s": latency,
        "requests": len(calls),
        "answered_429": refused,
        "share_429": refused / len(calls) if calls else 0.0,
        "synced": outcomes.count("synced"),
        "failed_429": sum(1 for o, m in result["results"] if o == "failed" and "429" in m),
        "left_for_next_cycle": sum(1 for _, m in result["results"] if "no request slot" in m),
        "seconds": result["seconds"],
        "synced_per_s": outcomes.count("synced") / result["seconds"],
    }


def burst(
    trees: list[Tree],
    rows: int,
    provider_rate: int,
    configured_rate: float,
    latency: tuple[float, float] = (0.0, 0.0),
) -> dict:
    """``rows`` nudges meant for one minute, a provider allowing ``provider_rate``/s with
    429 + retry_after above it; ``deliver`` started at every minute as cron starts it,
    both versions side by side, each with its own fake and database.

    Unlike ``bench.sidebyside.rate`` (which waits for a minute's runs to end before
    starting the next), a run still going when the minute turns does not hold the
    next one back: on a loaded host a run's start-up alone takes 5-30 s, and waiting
    shifted every later run by that much — not what cron does.
    """
    from datetime import UTC, datetime, timedelta

    fakes: dict[str, FakeTelegram] = {}
    materialize_s = {}
    for tree in trees:
        tree.fresh_database()
    start = trees[0].database_now()
    intended = (start + timedelta(minutes=9)).replace(second=0, microsecond=0)
    for tree in trees:
        tree.seed(_seed_group("rate", rows, 1, intended + LEAD))
        fakes[tree.label] = FakeTelegram(
            max_per_second=provider_rate,
            retry_after=2,
            latency=latency[0],
            latency_spread=latency[1] - latency[0],
        ).start()
    env = {
        label: _telegram_env(fake, NUDGE_TELEGRAM_RATE=str(configured_rate))
        for label, fake in fakes.items()
    }
    try:
        # Both versions' materialize at once: one after the other, on a loaded host,
        # took four of the burst's nine minutes of lead before either could deliver.
        planning = {
            tree.label: tree.start(
                "materialize", "--now", start.isoformat(), "--no-sync", **env[tree.label]
            )
            for tree in trees
        }
        for label, process in planning.items():
            materialize_s[label] = float(re.search(r" in ([0-9.]+)s", _summary(process))[1])
        started = []
        end = intended + timedelta(minutes=1, seconds=30)
        while datetime.now(UTC) < end:
            started += [(tree.label, tree.start("deliver", **env[tree.label])) for tree in trees]
            now = datetime.now(UTC)
            next_minute = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
            time.sleep(max(0.0, (next_minute - now).total_seconds()))
        summaries: dict[str, list[str]] = {tree.label: [] for tree in trees}
        for label, process in started:
            summaries[label].append(_summary(process))
        results = {}
        for tree in trees:
            fake = fakes[tree.label]
            late = _lateness(fake, {f"rate{i}-0": intended.timestamp() for i in range(rows)})
            in_window = [x for x in late if -360 <= x <= 60]
            sends = len(fake.sends())
            results[tree.label] = {
                "rows": rows,
                "delivered": len(late),
                "share_in_window": len(in_window) / rows,
                # On time: sent no later than 60 s after its instant (early or not).
                "share_on_time": sum(1 for x in late if x <= 60) / rows,
                "moved_earlier": sum(1 for x in late if x < 0),
                "more_than_6_min_early": sum(1 for x in late if x < -360),
                "share_429": fake.flood_count() / sends if sends else 0.0,
                "worst_lateness_s": max(late) if late else None,
                "earliest_s": min(late) if late else None,
                "p95_lateness_s": _percentile(late, 0.95),
                "floods_429": fake.flood_count(),
                "send_calls": len(fake.sends()),
                "busiest_second": fake.busiest_second(),
                "outcomes": tree.outcomes(),
                "deliver_runs": len(summaries[tree.label]),
                "materialize_s": materialize_s[tree.label],
            }
        return {
            "provider_rate": provider_rate,
            "configured_rate": configured_rate,
            "provider_latency_s": list(latency),
            "intended": intended.isoformat(),
            **results,
        }
    finally:
        for fake in fakes.values():
            fake.stop()


def deliver_runs(tree: Tree) -> list[dict]:
    """Each deliver run's start and end (seconds into its minute), counts and summary."""
    with psycopg.connect(ADMIN_URL, dbname=tree.database) as admin:
        rows = admin.execute(
            "SELECT started_at, finished_at, counts, summary FROM sweep_runs"
            " WHERE sweep = 'deliver' ORDER BY started_at"
        ).fetchall()
    runs = []
    for started, finished, counts, summary in rows:
        minute = started.replace(second=0, microsecond=0)
        runs.append(
            {
                "minute": f"{minute:%H:%M}",
                "started_s": round((started - minute).total_seconds(), 1),
                "finished_s": round((finished - minute).total_seconds(), 1) if finished else None,
                **{
                    key: counts.get(key)
                    for key in ("claimed", "sent", "released", "slots_missed", "rate_limited")
                },
                "rates": counts.get("rates"),
                "summary": summary,
            }
        )
    return runs


def burst_summary(sittings: list[dict]) -> dict:
    """Min / median / max over the sittings of each version's headline figures."""
    keys = ("share_on_time", "share_in_window", "share_429", "earliest_s", "moved_earlier")
    keys += ("more_than_6_min_early", "p95_lateness_s", "worst_lateness_s")
    summary: dict = {"sittings": len(sittings)}
    for label in ("baseline", "current"):
        summary[label] = {}
        for key in keys:
            values = sorted(x[label][key] for x in sittings if x[label][key] is not None)
            if values:
                summary[label][key] = [values[0], statistics.median(values), values[-1]]
    return summary


@contextlib.contextmanager
def current_tree(rev: str, tag: str) -> Iterator[Tree]:
    """This checkout, or ``rev`` checked out apart (labelled "current" either way)."""
    if not rev:
        yield Tree("current", ROOT, tag)
        return
    with baseline_tree(rev, tag) as tree:
        yield Tree("current", tree.path, tag)


def _today_at(hour: int):
    from datetime import UTC, datetime, timedelta

    start = datetime.now(UTC).replace(hour=hour, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1), start + timedelta(days=1, hours=1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pacing", description=__doc__)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--current", default="", help="a commit to run instead of this checkout")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {WORKLOADS}")
    parser.add_argument("--tag", default="_pacing", help="suffix for this run's databases")
    parser.add_argument("--json", default=str(ROOT / "bench/history/pacing.json"))
    parser.add_argument("--connections", type=int, default=600)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--quota", type=int, default=20, help="the calendar fake's requests/s")
    parser.add_argument("--rows", type=int, default=2_400, help="the burst's nudges")
    parser.add_argument(
        "--latency",
        default="0",
        help="the burst's Telegram answer time in seconds, or a range drawn from: 0.05-0.15",
    )
    parser.add_argument("--sittings", type=int, default=1, help="bursts, one after the other")
    args = parser.parse_args()
    only = [w for w in args.only.split(",") if w] or list(WORKLOADS)
    target = Path(args.json)
    results: dict = json.loads(target.read_text()) if target.exists() else {}
    results["baseline"] = args.baseline

    def save() -> None:
        target.write_text(json.dumps(results, indent=1, default=str))

    with (
        baseline_tree(args.baseline, args.tag) as baseline,
        current_tree(args.current, args.tag) as current,
    ):
        trees = [baseline, current]
        if "calendar" in only:
            print("== calendar: a sync of many connections against a quota", flush=True)
            results["calendar"] = {
                tree.label: calendar(
                    tree, args.connections, args.threads, args.quota, 0.3, float(args.quota)
                )
                for tree in trees
            }
            print(json.dumps(results["calendar"], indent=1), flush=True)
            save()
        low, _, high = args.latency.partition("-")
        latency = (float(low), float(high or low))
        for sitting in range(args.sittings) if "burst" in only else ():
            print(f"== burst at the limit, sitting {sitting + 1} (about 11 minutes)", flush=True)
            started = time.time()
            one_burst = burst(trees, args.rows, 10, 10.0, latency)
            one_burst["wall_s"] = time.time() - started
            one_burst["load_after"] = os.getloadavg()
            if args.current:
                one_burst["current_rev"] = args.current
            for tree in trees:
                one_burst[tree.label]["runs"] = deliver_runs(tree)
            results["burst"] = one_burst
            results.setdefault("burst_sittings", []).append(one_burst)
            print(json.dumps(one_burst, indent=1, default=str), flush=True)
            save()
        if results.get("burst_sittings"):
            results["burst_summary"] = burst_summary(results["burst_sittings"])
            print(json.dumps(results["burst_summary"], indent=1), flush=True)
            save()
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
