"""Calendar sync in one materialize run, side by side: users synced and queued per second.

``python -m bench.calendar_sync [--users 1000] [--baseline-users 100] [--baseline REV]
[--providers ics,google,microsoft,caldav] [--json PATH] [--tag SUFFIX]``

One ``manage.py materialize`` process, as cron runs it, default settings: every
user has one calendar whose provider answers each request after 300 ms (the
fakes of tests/fakes, in this process), one meeting an hour ahead, so every
user gets one nudge queued. Each version (this checkout and the baseline
commit, cloned into a temporary worktree as ``bench.sidebyside`` does) gets a
fresh database per provider on the local PostgreSQL server
(``NUDGE_BENCH_ADMIN_URL``), seeded through its own ORM, analysed, then one
materialize run; its own summary line gives the users, queued nudges and
seconds. The baseline syncs one calendar at a time (~3 users/s), so it is run
with fewer users (``--baseline-users``; 0 runs this checkout alone); users/s is the
comparable figure, and CPU seconds (the materialize process and its children) the
one a loaded machine does not distort much.

ICS feeds are spread over eight fake hosts (eight ports) because the per-host
cap counts host:port: all on one host, a run is held to
``CALENDAR_SYNC_PER_HOST`` / latency (16 / 0.3 s, about 53 feeds a second) by
design. CalDAV calendars are spread the same way over eight real CalDAV servers
(Radicale, ``tests/fakes/caldav_server``), each answering after 300 ms and counting
the requests it answered; the first run reads each calendar (two requests), the
next asks sync-collection what changed (one request, nothing). ``--transport`` adds
the threads-versus-asyncio probe: the same 600 feed GETs at 64 at once, each way,
in a child process (wall and CPU seconds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from cryptography.fernet import Fernet

from bench.sidebyside import ADMIN_URL, ROOT, Tree, baseline_tree
from tests.fakes import base as fake_base
from tests.fakes import caldav_server, google_server, microsoft_server
from tests.fakes.caldav_server import RadicaleServer
from tests.fakes.google_server import FakeGoogle, google_event
from tests.fakes.ics_server import FakeIcsFeed
from tests.fakes.microsoft_server import FakeGraph, graph_event

# Up to 64 connections arrive at once; the fakes' default listen backlog is 5.
fake_base._Server.request_queue_size = 256
caldav_server._Server.request_queue_size = 256
CALDAV_PASSWORD = "bench-app-password"  # noqa: S105 - the bench servers' own

DEFAULT_BASELINE = "25ad87f"
# Providers newer than the default baseline: measured on this checkout only.
NEW_PROVIDERS = {"caldav"}
LATENCY = 0.3
ICS_HOSTS = 8
TAG = "_calsync"
KEY = Fernet.generate_key().decode()

SEED = """
import json, os
from datetime import datetime
from django.contrib.auth import get_user_model
try:
    from providers import crypto
except ImportError:  # the baseline, before the providers had a room of their own
    from calendars import crypto
from calendars.models import CalendarConnection
try:
    from accounts.models import DeliverySettings
except ImportError:  # the baseline, before settings moved to accounts
    from scheduled_sends.models import DeliverySettings
from tenancy.scope import tenant_scope
spec = json.loads(open(os.environ["CSB_SEED_FILE"]).read())
users = get_user_model().objects.bulk_create(
    [get_user_model()(username=f"cal{i}") for i in range(len(spec))], batch_size=2000
)
for i, (user, c) in enumerate(zip(users, spec)):
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(
            user=user, channel="telegram", default_lead_minutes=10,
            telegram_chat_id=str(1_000_000 + i),
        )
        CalendarConnection.objects.create(
            user=user, provider=c["provider"], account=c["account"],
            calendar_id=c["calendar_id"], allow_private_network=True,
            access_token_encrypted=crypto.encrypt(c["access"]),
            refresh_token_encrypted=crypto.encrypt(c["refresh"]),
            feed_url_encrypted=crypto.encrypt(c["feed_url"]),
            token_expires_at=datetime.fromisoformat(c["expires"]) if c["expires"] else None,
        )
"""
SUMMARY = re.compile(
    r"materialize: users (\d+), queued (\d+), .*calendars synced (\d+) \(unchanged (\d+), "
    r"failed (\d+)\).* in ([0-9.]+)s"
)


class SlowGoogle(FakeGoogle):
    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes):
        self.stopping.wait(LATENCY)
        return super().answer(method, path, headers, body)


class SlowGraph(FakeGraph):
    def answer(self, method: str, path: str, headers: dict[str, str], body: bytes):
        self.stopping.wait(LATENCY)
        return super().answer(method, path, headers, body)


def _ics_body(start: datetime) -> str:
    stamp = "%Y%m%dT%H%M%SZ"
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\nBEGIN:VEVENT\r\n"
        f"UID:meeting@example.com\r\nDTSTART:{start:{stamp}}\r\n"
        f"DTEND:{start + timedelta(hours=1):{stamp}}\r\nSUMMARY:Design review\r\n"
        "BEGIN:VALARM\r\nACTION:DISPLAY\r\nTRIGGER:-PT10M\r\nEND:VALARM\r\n"
        "END:VEVENT\r\nEND:VCALENDAR\r\n"
    )


def _connections(provider: str, users: int, fakes: list[Any], expires: datetime) -> list[dict]:
    specs = []
    for i in range(users):
        spec = {"provider": provider, "account": "", "calendar_id": "", "access": "",
                "refresh": "", "feed_url": "", "expires": ""}  # fmt: skip
        if provider == "ics":
            spec.update(account="feed", feed_url=fakes[i % len(fakes)].feed_url)
        elif provider == "caldav":
            server = fakes[i % len(fakes)]
            spec.update(
                account="bench",
                calendar_id=server.calendar,
                access=CALDAV_PASSWORD,
                feed_url=server.url + server.calendar,
            )
        else:
            access, refresh = fakes[0].issue_tokens()
            module = google_server if provider == "google" else microsoft_server
            spec.update(
                account=module.ACCOUNT,
                calendar_id="primary" if provider == "google" else "",
                access=access,
                refresh=refresh,
                expires=expires.isoformat(),
            )
        specs.append(spec)
    return specs


def _env(provider: str, fakes: list[Any]) -> dict[str, str]:
    env = {"CALENDAR_TOKEN_KEYS": KEY}
    if provider == "google":
        env.update(
            GOOGLE_CLIENT_ID=google_server.CLIENT_ID,
            GOOGLE_CLIENT_SECRET=google_server.CLIENT_SECRET,
            GOOGLE_TOKEN_URL=fakes[0].token_url,
            GOOGLE_API_BASE_URL=fakes[0].api_base_url,
        )
    elif provider == "microsoft":
        env.update(
            MICROSOFT_CLIENT_ID=microsoft_server.CLIENT_ID,
            MICROSOFT_CLIENT_SECRET=microsoft_server.CLIENT_SECRET,
            MICROSOFT_TENANT=microsoft_server.TENANT,
            MICROSOFT_LOGIN_BASE_URL=fakes[0].login_base_url,
            MICROSOFT_GRAPH_BASE_URL=fakes[0].graph_base_url,
        )
    return env


def _analyze(tree: Tree) -> None:
    """This machine's server runs with autovacuum off: statistics by hand after loading."""
    with psycopg.connect(ADMIN_URL, dbname=tree.database, autocommit=True) as admin:
        admin.execute("ANALYZE")


def measure(tree: Tree, provider: str, users: int, args: tuple[str, ...] = ()) -> dict[str, Any]:
    """One fresh database, ``users`` users with one calendar each, one materialize run
    (``args`` added to its command line, e.g. ``--no-sync``)."""
    with ExitStack() as stack:
        if provider == "ics":
            fakes: list[Any] = [stack.enter_context(FakeIcsFeed()) for _ in range(ICS_HOSTS)]
        elif provider == "caldav":
            fakes = [stack.enter_context(RadicaleServer()) for _ in range(ICS_HOSTS)]
        else:
            fakes = [stack.enter_context(SlowGoogle() if provider == "google" else SlowGraph())]
        tree.fresh_database()
        now = tree.database_now()
        meeting = now + timedelta(hours=1)
        for fake in fakes:
            if provider == "ics":
                fake.body, fake.latency = _ics_body(meeting), LATENCY
            elif provider == "caldav":
                fake.add_user("bench", CALDAV_PASSWORD)
                fake.calendar = fake.make_calendar("bench", "work", "Work")
                fake.put_event(fake.calendar, "meeting", _ics_body(meeting))
                fake.latency = LATENCY
            elif provider == "google":
                fake.events["primary"] = [google_event("meeting", meeting, meeting + timedelta(1))]
            else:
                fake.events = [graph_event("meeting", meeting, meeting + timedelta(hours=1))]
        env = _env(provider, fakes)
        specs = _connections(provider, users, fakes, now + timedelta(hours=2))
        seed_file = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "seed.json"
        seed_file.write_text(json.dumps(specs))
        tree.run("shell", "-c", SEED, CSB_SEED_FILE=str(seed_file), **env)
        _analyze(tree)
        first = _materialize(tree, now, env, args)
        requests = sum(len(fake.requests) for fake in fakes)
        most_at_once = max((getattr(f, "max_in_flight", 0) for f in fakes), default=0)
        # The next cron run (the next cycle: materialize runs each 15-minute cycle once):
        # feeds answer 304, the APIs the same events, CalDAV servers "nothing changed".
        again = _materialize(tree, now + timedelta(minutes=15), env, args)
        again["provider_requests"] = sum(len(fake.requests) for fake in fakes) - requests
    return {
        "provider": provider,
        **first,
        "provider_requests": requests,
        "most_in_flight_one_host": most_at_once or None,
        "again": again,
    }


def _materialize(
    tree: Tree, now: datetime, env: dict[str, str], args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """One ``manage.py materialize`` (calendars synced), read from its summary line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.monotonic()
    out = tree.run("materialize", "--now", now.isoformat(), *args, **env)
    process_seconds = time.monotonic() - launched
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The process and its forked parses, start-up included: what a free core would need.
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    found = SUMMARY.search(out)
    if found is None:
        raise RuntimeError(f"{tree.label}: no summary in {out!r}")
    users, queued, synced, unchanged, failed = (int(found[i]) for i in range(1, 6))
    seconds = float(found[6])
    return {
        "users": users,
        "queued": queued,
        "synced": synced,
        "unchanged": unchanged,
        "failed": failed,
        "seconds": seconds,
        "users_per_second": round(users / seconds, 1),
        # The whole process, interpreter and Django start-up included (~1 s, once per run).
        "process_seconds": round(process_seconds, 1),
        "users_per_second_with_start_up": round(users / process_seconds, 1),
        "cpu_seconds": round(cpu, 1),
    }


# --- threads or asyncio: the same GETs both ways -------------------------------------------


def _threads_probe(urls: list[str], concurrency: int) -> None:
    import urllib3

    pool = urllib3.PoolManager(maxsize=concurrency)

    def get(url: str) -> int:
        return pool.request("GET", url, retries=False).status

    with ThreadPoolExecutor(concurrency) as executor:
        statuses = list(executor.map(get, urls))
    assert all(status == 200 for status in statuses), statuses[:5]


async def _asyncio_get(url: str, gate: asyncio.Semaphore) -> int:
    parts = urlsplit(url)
    async with gate:
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        request = f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode())
        await writer.drain()
        status = int((await reader.readline()).split()[1])
        await reader.read()
        writer.close()
        await writer.wait_closed()
        return status


def _asyncio_probe(urls: list[str], concurrency: int) -> None:
    async def main() -> list[int]:
        gate = asyncio.Semaphore(concurrency)
        return await asyncio.gather(*(_asyncio_get(url, gate) for url in urls))

    assert all(status == 200 for status in asyncio.run(main()))


def transport(requests: int = 600, concurrency: int = 64) -> dict[str, Any]:
    """Wall and CPU seconds of ``requests`` GETs at ``concurrency`` at once, each way,
    each in a child process of its own (the fakes' CPU is not counted)."""
    figures: dict[str, Any] = {"requests": requests, "concurrency": concurrency}
    with ExitStack() as stack:
        hosts = [stack.enter_context(FakeIcsFeed()) for _ in range(4)]
        for host in hosts:
            host.body, host.latency = _ics_body(datetime.now(UTC)), LATENCY
        urls = [hosts[i % len(hosts)].feed_url for i in range(requests)]
        for way in ("threads", "asyncio"):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.calendar_sync",
                    "--probe",
                    way,
                    "--probe-concurrency",
                    str(concurrency),
                ],
                input=json.dumps(urls),
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=True,
            )
            figures[way] = json.loads(done.stdout)
    return figures


def _probe(way: str, concurrency: int) -> None:
    urls = json.loads(sys.stdin.read())
    started, cpu = time.monotonic(), time.process_time()
    (_threads_probe if way == "threads" else _asyncio_probe)(urls, concurrency)
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    print(json.dumps({"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}))


# --- the run --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument(
        "--baseline-users", type=int, default=100, help="0: this checkout only (no baseline)."
    )
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--providers", default="ics,google,microsoft")
    parser.add_argument("--transport", action="store_true", help="Add the threads/asyncio probe.")
    parser.add_argument("--json", type=Path, default=ROOT / "bench/history/calendar_sync.json")
    parser.add_argument(
        "--tag", default="", help="suffix of the databases' names, for runs going on at once"
    )
    parser.add_argument("--probe", choices=("threads", "asyncio"), help=argparse.SUPPRESS)
    parser.add_argument("--probe-concurrency", type=int, default=64, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        _probe(args.probe, args.probe_concurrency)
        return
    results: dict[str, Any] = {
        "latency_seconds": LATENCY,
        "baseline": args.baseline,
        "runs": [],
    }
    if args.transport:
        results["transport"] = transport()
        print(json.dumps(results["transport"]), flush=True)
    tag = TAG + args.tag
    with baseline_tree(args.baseline, tag) if args.baseline_users else nullcontext() as baseline:
        current = Tree("current", ROOT, tag)
        trees = [(baseline, args.baseline_users)] if baseline is not None else []
        extra = ()
        for provider in args.providers.split(","):
            for tree, users in (*trees, (current, args.users)):
                if tree is not current and provider in NEW_PROVIDERS:
                    continue  # the baseline has no such provider: this checkout alone
                more = extra if tree is current else ()
                figures = {"version": tree.label, **measure(tree, provider, users, more)}
                print(json.dumps(figures), flush=True)
                results["runs"].append(figures)
    args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
