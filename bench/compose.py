"""Issue 22: does composing with buttons and languages slow delivery? Side by side.

``python -m bench.compose [--baseline e367e4e] [--rows 3000] [--rounds 2] [--json PATH]``

The "burst vs latency" workload of ``bench.sidebyside`` (nudges already due,
a fake Telegram Bot API answering each ``sendMessage`` in 100 ms, one
60-second ``deliver`` run, ``NUDGE_TELEGRAM_RATE=1000`` so that it measures
the pipeline, not pacing), with data that takes issue 22's paths:

* every user on Telegram, so the current version builds and signs an inline
  keyboard (Snooze, Done for follow-ups, Join where there is a link) for each
  send and the fake records it as ``reply_markup``;
* half the users have a follow-up, half a calendar event; of the events half
  carry a meeting link and half a location, where the version's model has
  those fields (the baseline has neither: its events are title and time);
* languages de/es/fr/pt-br/en and 12/24-hour clocks in turn, where the
  version's ``DeliverySettings`` has those fields; five time zones in both.

Each version runs in its own freshly migrated database on one PostgreSQL
server (``bench.sidebyside.Tree``), seeded through its own ORM and tenant
scopes, queued by its own ``materialize``, ANALYZEd (this server runs with
autovacuum off), then sent by its own ``deliver``. The versions alternate
round by round (baseline, current, baseline, current, …), each with a fresh
fake. Lateness is measured at the fake: a message's arrival minus its
intended instant (the subject's start minus the 10-minute lead), and
separately its arrival minus the ``deliver`` process's start, which leaves
out the setup time between seeding and the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import time
from datetime import timedelta
from pathlib import Path

import psycopg

from bench.sidebyside import (
    ADMIN_URL,
    LEAD,
    ROOT,
    Tree,
    _percentile,
    _summary,
    _telegram_env,
    baseline_tree,
)
from tests.fakes.telegram_server import FakeTelegram

DEFAULT_BASELINE = "e367e4e"  # issue 22's starting commit
CHAT_BASE = 5_000_000
LANGUAGES = ("de", "es", "fr", "pt-br", "en")
ZONES = ("Europe/Berlin", "Europe/Madrid", "Europe/Paris", "America/Sao_Paulo", "America/New_York")
JOIN_URL = "https://meet.google.com/abc-defg-hij"
LOCATION = "Room 4.12, Main building, Alexanderplatz 1, 10178 Berlin"

# Seeds through the version's own ORM, each user inside their own tenant scope;
# the fields only where the version's models have them.
SEED = """
import json, os
from datetime import datetime, timedelta
from django.contrib.auth import get_user_model
from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent
from followups.models import FollowUp
from tenancy.scope import tenant_scope
spec = json.loads(os.environ["SBS_SEED"])
User = get_user_model()
settings_fields = {f.name for f in DeliverySettings._meta.get_fields()}
event_fields = {f.name for f in CalendarEvent._meta.get_fields()}
starts = datetime.fromisoformat(spec["starts_at"])
languages, zones = spec["languages"], spec["zones"]
users = User.objects.bulk_create(
    [User(username=f"c22u{i}") for i in range(spec["users"])], batch_size=2000
)
for i, user in enumerate(users):
    extra = {}
    if "language" in settings_fields:
        extra["language"] = languages[i % len(languages)]
    if "clock" in settings_fields:
        extra["clock"] = "12h" if (i // len(languages)) % 2 else "24h"
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(
            user=user, channel="telegram", default_lead_minutes=10,
            telegram_chat_id=str(spec["chat_base"] + i), timezone=zones[i % len(zones)], **extra,
        )
        if i % 2 == 0:
            FollowUp.objects.create(
                user=user, title=f"Send the signed lease back to Ms Okafor #{i}", due_at=starts
            )
            continue
        connection = CalendarConnection.objects.create(
            user=user, provider="google", account=f"c22u{i}@example.com"
        )
        place = {}
        if i % 4 == 1 and "join_url" in event_fields:
            place["join_url"] = spec["join_url"]
        if "location" in event_fields:
            place["location"] = spec["location"]
        CalendarEvent.objects.create(
            user=user, connection=connection, provider_event_id=f"ev{i}",
            title=f"Design review: checkout flow, second pass #{i}",
            starts_at=starts, ends_at=starts + timedelta(minutes=30), **place,
        )
"""

# Times compose (and, where the version has one, the Telegram keyboard with its
# signed callback data and its JSON form, as the library sends it) in-process,
# on the same ten shapes as the seed; printed as JSON.
MICRO = """
import inspect, json, os, time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from messaging import messages
spec = json.loads(os.environ["SBS_MICRO"])
params = inspect.signature(messages.compose).parameters
now = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
starts = now + timedelta(minutes=10)
cases = []
for i in range(10):
    follow_up = i % 2 == 0
    kw = dict(
        kind="follow_up" if follow_up else "event",
        title="Send the signed lease back to Ms Okafor" if follow_up else "Design review",
        starts_at=starts, now=now, tz_name=spec["zones"][i % 5], valid_until=starts,
    )
    if "language" in params:
        kw.update(language=spec["languages"][i % 5], clock="12h" if (i // 5) % 2 else "24h")
    if "join_url" in params and not follow_up:
        kw.update(join_url=spec["join_url"] if i % 4 == 1 else "", location=spec["location"])
    cases.append(kw)
started = time.perf_counter()
composed = [messages.compose(**kw) for kw in cases]
first_ten_ms = (time.perf_counter() - started) * 1000
n = spec["n"]
started = time.perf_counter()
for j in range(n):
    messages.compose(**cases[j % 10])
out = {"first_ten_ms": first_ten_ms, "compose_us": (time.perf_counter() - started) / n * 1e6}
try:
    from messaging.channels.base import NudgeActions
    from messaging.telegram.send import keyboard
except ImportError:
    keyboard = None
if keyboard is not None:
    with_actions = [
        replace(m, actions=NudgeActions(send_id=10_000 + j, snooze_minutes=10,
                                        can_mark_done=cases[j]["kind"] == "follow_up"))
        for j, m in enumerate(composed)
    ]
    started = time.perf_counter()
    for j in range(n):
        keyboard(str(5_000_000 + j), with_actions[j % 10])
    out["keyboard_us"] = (time.perf_counter() - started) / n * 1e6
    markups = [keyboard(str(5_000_000 + j), m) for j, m in enumerate(with_actions)]
    started = time.perf_counter()
    for j in range(n):
        markups[j % 10].to_json()
    out["keyboard_to_json_us"] = (time.perf_counter() - started) / n * 1e6
print(json.dumps(out))
"""

SUMMARY_P95 = re.compile(r"p95 ([0-9.]+)s")
SUMMARY_RATE = re.compile(r" in ([0-9.]+)s \(([0-9.]+)/s")


def analyze(tree: Tree) -> None:
    """The planner's statistics after loading: autovacuum is off on this server."""
    with psycopg.connect(ADMIN_URL, dbname=tree.database, autocommit=True) as admin:
        admin.execute("ANALYZE")


def one_round(tree: Tree, rows: int, provider_latency: float) -> dict:
    """Seed ``rows`` users due 30 s ago, materialize, ANALYZE, one 60-second deliver."""
    tree.fresh_database()
    now = tree.database_now()
    starts = now + LEAD - timedelta(seconds=30)
    seed = {
        "users": rows,
        "starts_at": starts.isoformat(),
        "languages": LANGUAGES,
        "zones": ZONES,
        "chat_base": CHAT_BASE,
        "join_url": JOIN_URL,
        "location": LOCATION,
    }
    tree.run("shell", "-c", SEED, SBS_SEED=json.dumps(seed))
    materialize_s = tree.materialize(now)
    analyze(tree)
    intended = (starts - LEAD).timestamp()
    with FakeTelegram(latency=provider_latency) as fake:
        env = _telegram_env(
            fake,
            NUDGE_RUN_BUDGET_SECONDS="60",
            NUDGE_LEASE_SECONDS="300",
            NUDGE_TELEGRAM_RATE="1000",  # the pipeline, not pacing
        )
        load = os.getloadavg()
        started_wall = time.time()
        started = time.monotonic()
        # The deliver process is the only child reaped meanwhile: its CPU time,
        # which the other load on the machine changes less than its wall time.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary = _summary(tree.start("deliver", **env))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = time.monotonic() - started
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        delivered = list(fake.delivered)
    late = [d.at - intended for d in delivered]
    since_start = [d.at - started_wall for d in delivered]
    markups = [d.params.get("reply_markup") for d in delivered]
    keyboards = [json.loads(m) if isinstance(m, str) else m for m in markups if m]
    buttons = [b for k in keyboards for row in k["inline_keyboard"] for b in row]
    samples = {}
    for d in delivered:
        index = int(d.recipient) - CHAT_BASE
        samples.setdefault(f"{LANGUAGES[index % 5]}-{'fu' if index % 2 == 0 else 'ev'}", d.text)
    p95_summary = SUMMARY_P95.search(summary)
    rate = SUMMARY_RATE.search(summary)
    arrivals = sorted(d.at for d in delivered)
    window = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
    return {
        "version": tree.label,
        "rows": rows,
        "sent": len(delivered),
        "recipients": len({d.recipient for d in delivered}),
        "seconds": seconds,
        "rows_per_second": len(delivered) / seconds,
        # The process's own figure: claimed rows over the run, after Django's start.
        "run_seconds": float(rate[1]) if rate else None,
        "run_rows_per_second": float(rate[2]) if rate else None,
        # First to last arrival at the fake: the send pipeline alone.
        "first_arrival_after_start_s": arrivals[0] - started_wall if arrivals else None,
        "send_window_rows_per_second": len(arrivals) / window if window else None,
        "deliver_cpu_s": cpu,
        "cpu_ms_per_sent": cpu / max(1, len(delivered)) * 1000,
        "p50_lateness_s": _percentile(late, 0.50),
        "p95_lateness_s": _percentile(late, 0.95),
        "p95_since_run_start_s": _percentile(since_start, 0.95),
        "run_start_after_intended_s": started_wall - intended,
        "summary_p95_s": float(p95_summary[1]) if p95_summary else None,
        "with_keyboard": len(keyboards),
        "join_buttons": sum(1 for b in buttons if b.get("url")),
        "callback_buttons": sum(1 for b in buttons if b.get("callback_data")),
        "longest_callback_data": max(
            (len(b["callback_data"]) for b in buttons if "callback_data" in b), default=0
        ),
        "materialize_s": materialize_s,
        "load_average_at_start": load,
        "load_average_at_end": os.getloadavg(),
        "summary": summary,
        "samples": samples,
    }


def micro(tree: Tree, n: int = 20_000) -> dict:
    """compose (and the keyboard) per message, in the version's own process."""
    spec = {"n": n, "languages": LANGUAGES, "zones": ZONES, "join_url": JOIN_URL}
    spec["location"] = LOCATION
    out = tree.run("shell", "-c", MICRO, SBS_MICRO=json.dumps(spec))
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compose", description=__doc__)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the git revision to compare")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--latency", type=float, default=0.1, help="the fake's answer time, s")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per version, alternating")
    parser.add_argument(
        "--micro", action="store_true", help="only time compose and the keyboard in-process"
    )
    parser.add_argument("--tag", default="_c22", help="suffix for this run's databases")
    parser.add_argument("--json", metavar="PATH", default=str(ROOT / "bench/history/compose.json"))
    args = parser.parse_args()
    results: dict = {
        "baseline": args.baseline,
        "rows": args.rows,
        "provider_latency_s": args.latency,
        "started": time.time(),
        "rounds": [],
    }
    target = Path(args.json)
    current = Tree("current", ROOT, args.tag)
    with baseline_tree(args.baseline, args.tag) as baseline:
        if args.micro:
            figures = {t.label: [micro(t) for _ in range(3)] for t in (baseline, current)}
            print(json.dumps(figures, indent=1))
            merged = json.loads(target.read_text()) if target.exists() else {}
            merged["micro"] = figures
            target.write_text(json.dumps(merged, indent=1, default=str))
            return
        for n in range(args.rounds):
            for tree in (baseline, current):
                print(f"== round {n + 1}: {tree.label}", flush=True)
                figures = one_round(tree, args.rows, args.latency)
                figures["round"] = n + 1
                results["rounds"].append(figures)
                print(
                    json.dumps({k: v for k, v in figures.items() if k != "samples"}, default=str),
                    flush=True,
                )
                target.write_text(json.dumps(results, indent=1, default=str))
    results["finished"] = time.time()
    target.write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
