"""Issue 20: a simulated day of calendars with push, and syncToken / delta against the window.

``python -m bench.push [--connections N] [--changes-per-day K] [--seed S] [--json PATH]``

Part 1 — a day, replayed. ``N`` Google, ``N`` Graph and ``N`` ICS connections
(one per user) against the fakes of tests/fakes on 127.0.0.1, the app itself
served on 127.0.0.1 for the fakes to post notifications to. Each calendar
has a meeting every three hours; ``K`` times a day, at seeded random
instants, one of its coming meetings is moved 15 minutes (every fifth change
cancels it instead), at the fake, which notifies as the provider would. The
clock is replayed minute by minute (``--now``-style, the fakes' channel
clocks moved with it) with the cron lines as documented: ``materialize``
every 15 minutes, ``sync_changed`` every minute. The same day runs twice in
one process: push off (``CALENDAR_PUSH_BASE_URL`` empty — the polling of
25ad87f, whose code path is unchanged) and push on. Counted at the fakes:
provider requests per connection per day (calendar API, token refreshes
apart; ICS 200s and 304s apart), and freshness — from the change at the fake
to the queue reflecting it (the simulated wait for the next job, plus that
job's real wall time).

Part 2 — Google ``syncToken`` and Graph ``calendarView/delta`` against the
window re-query: calls and bytes per change, read from the same fakes, for
one calendar with the day's meetings plus two daily series a year ahead.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import env

T0 = datetime(2026, 12, 2, 0, 0, tzinfo=UTC)
MINUTES_PER_DAY = 24 * 60
LEAD = timedelta(minutes=10)


@dataclass
class Change:
    provider: str
    user_id: int
    calendar: str
    event_id: str
    at: datetime
    cancel: bool
    old_start: datetime
    new_start: datetime
    reflected_after: float | None = None


def _meetings(index: int, days: int = 2) -> list[tuple[str, datetime]]:
    """A meeting every three hours, offset per calendar so minutes do not all coincide."""
    first = T0 + timedelta(minutes=30 + (index * 7) % 170)
    return [(f"m{k}", first + timedelta(hours=3 * k)) for k in range(days * 8)]


def _ics(events: dict[str, datetime]) -> str:
    stamp = "20261201T000000Z"
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//bench//push//EN"]
    for uid, start in sorted(events.items()):
        lines += [
            "BEGIN:VEVENT",
            f"UID:{uid}@bench",
            f"DTSTAMP:{stamp}",
            f"DTSTART:{start:%Y%m%dT%H%M%SZ}",
            f"DTEND:{start + timedelta(minutes=30):%Y%m%dT%H%M%SZ}",
            f"SUMMARY:Meeting {uid}",
            "END:VEVENT",
        ]
    return "\r\n".join([*lines, "END:VCALENDAR", ""])


class Day:
    """One replayed day against fresh fakes and fresh users."""

    def __init__(
        self, n: int, changes_per_day: int, seed: int, push: bool, app_url: str, label: str
    ) -> None:
        self.n, self.k, self.seed, self.push = n, changes_per_day, seed, push
        self.app_url, self.label = app_url, label

    # --- set-up ------------------------------------------------------------------------
    def setup(self) -> None:
        from django.conf import settings

        from tests.fakes import google_server, microsoft_server
        from tests.fakes.google_server import FakeGoogle, google_event
        from tests.fakes.ics_server import FakeIcsFeed
        from tests.fakes.microsoft_server import FakeGraph, graph_event

        self.google, self.graph = FakeGoogle().start(), FakeGraph().start()
        self.feeds = [FakeIcsFeed().start() for _ in range(self.n)]
        for fake in (self.google, self.graph):
            fake.push.clock = T0
        settings.GOOGLE_CLIENT_ID, settings.GOOGLE_CLIENT_SECRET = (
            google_server.CLIENT_ID,
            google_server.CLIENT_SECRET,
        )
        settings.GOOGLE_TOKEN_URL = self.google.token_url
        settings.GOOGLE_API_BASE_URL = self.google.api_base_url
        settings.MICROSOFT_CLIENT_ID = microsoft_server.CLIENT_ID
        settings.MICROSOFT_CLIENT_SECRET = microsoft_server.CLIENT_SECRET
        settings.MICROSOFT_TENANT = microsoft_server.TENANT
        settings.MICROSOFT_LOGIN_BASE_URL = self.graph.login_base_url
        settings.MICROSOFT_GRAPH_BASE_URL = self.graph.graph_base_url
        settings.CALENDAR_PUSH_BASE_URL = self.app_url if self.push else ""

        self.starts: dict[tuple[str, str], dict[str, datetime]] = {}
        self.users: dict[tuple[str, str], int] = {}
        for i in range(self.n):
            cal = f"cal{i}"
            meetings = _meetings(i)
            self.google.events[cal] = [
                google_event(uid, s, s + timedelta(minutes=30)) for uid, s in meetings
            ]
            self.graph.calendars[cal] = [
                graph_event(uid, s, s + timedelta(minutes=30), reminder=10) for uid, s in meetings
            ]
            self.feeds[i].body = _ics(dict(meetings))
            for provider in ("google", "microsoft", "ics"):
                self.starts[(provider, cal)] = dict(meetings)
                self.users[(provider, cal)] = self._connect(provider, i, cal)

    def _connect(self, provider: str, index: int, cal: str) -> int:
        from django.contrib.auth import get_user_model

        from accounts.models import DeliverySettings
        from calendars.models import CalendarConnection
        from calendars.push import worklist
        from providers import crypto
        from tenancy.scope import tenant_scope

        user = get_user_model().objects.create_user(
            username=f"push-{self.label}-{provider}-{index}"
        )
        fields: dict[str, Any] = {"account": cal, "calendar_id": cal}
        if provider == "ics":
            fields.update(
                calendar_id="",
                feed_url_encrypted=crypto.encrypt(self.feeds[index].feed_url),
                allow_private_network=True,
            )
        else:
            fake = self.google if provider == "google" else self.graph
            access, refresh = fake.issue_tokens()
            fields.update(
                access_token_encrypted=crypto.encrypt(access),
                refresh_token_encrypted=crypto.encrypt(refresh),
                token_expires_at=T0 + timedelta(hours=1),
            )
        with tenant_scope(user.pk):
            DeliverySettings.objects.create(
                user=user, channel="console", timezone="UTC", default_lead_minutes=10
            )
            connection = CalendarConnection.objects.create(user=user, provider=provider, **fields)
        if provider != "ics":
            worklist.enroll(connection.pk, user.pk, T0)
        return user.pk

    def stop(self) -> None:
        """Stop the fakes, and retire the day's users so the next day's sweeps skip them."""
        from django.contrib.auth import get_user_model

        from calendars.models import PushWork

        for fake in (self.google, self.graph, *self.feeds):
            fake.stop()
        get_user_model().objects.filter(pk__in=self.users.values()).update(is_active=False)
        PushWork.objects.filter(user_id__in=self.users.values()).delete()
        get_user_model().objects.filter(pk__in=self.users.values()).update(is_active=False)

    # --- the day -----------------------------------------------------------------------
    def plan_changes(self) -> list[tuple[datetime, str, str]]:
        rng = random.Random(self.seed)
        plan = []
        for provider, cal in self.starts:
            for _ in range(self.k):
                plan.append((T0 + timedelta(seconds=rng.uniform(60, 86_340)), provider, cal))
        return sorted(plan)

    def apply(self, at: datetime, provider: str, cal: str, number: int, target: str = "") -> Change:
        """One change at the fake: the calendar's next meeting moved 15 minutes (every fifth
        change: cancelled), or a new meeting in an hour when none is coming soon."""
        from tests.fakes.google_server import google_event
        from tests.fakes.microsoft_server import graph_event

        starts = self.starts[(provider, cal)]
        coming = sorted(
            (s, uid)
            for uid, s in starts.items()
            if at + timedelta(minutes=25) < s < at + timedelta(hours=2, minutes=30)
        )
        if target:
            coming = [(starts[target], target)]
        if coming:
            old_start, uid = coming[0]
            cancel = number % 5 == 4
            new_start = old_start + timedelta(minutes=15)
        else:  # nothing coming soon: the change is a new meeting in an hour
            uid, cancel = f"new{number}", False
            new_start = (at + timedelta(hours=1)).replace(second=0, microsecond=0)
            old_start = new_start - timedelta(days=1)  # no such nudge; reads as "moved in"
        user_id = self.users[(provider, cal)]
        change = Change(provider, user_id, cal, uid, at, cancel, old_start, new_start)
        if cancel:
            del starts[uid]
        else:
            starts[uid] = new_start
        if provider == "google":
            self.google.push.clock = at

            def edit(events: list[dict[str, Any]]) -> None:
                if not coming:
                    events.append(google_event(uid, new_start, new_start + timedelta(minutes=30)))
                for event in events:
                    if event["id"] == uid:
                        if cancel:
                            event["status"] = "cancelled"
                        else:
                            event["start"] = {"dateTime": new_start.isoformat(), "timeZone": "UTC"}
                            end = new_start + timedelta(minutes=30)
                            event["end"] = {"dateTime": end.isoformat(), "timeZone": "UTC"}

            self.google.change(edit, cal)
        elif provider == "microsoft":
            self.graph.push.clock = at

            def edit_graph(events: list[dict[str, Any]]) -> None:
                if not coming:
                    end = new_start + timedelta(minutes=30)
                    events.append(graph_event(uid, new_start, end, reminder=10))
                for event in list(events):
                    if event["id"] == uid:
                        if cancel:
                            events.remove(event)
                        else:
                            event["_start"], event["_end"] = (
                                new_start,
                                new_start + timedelta(minutes=30),
                            )

            self.graph.change(edit_graph, "deleted" if cancel else "updated", cal)
        else:
            self.feeds[int(cal[3:])].body = _ics(starts)
        return change

    def reflected(self, change: Change) -> bool:
        from scheduled_sends.models import ScheduledSend
        from tenancy.scope import tenant_scope

        with tenant_scope(change.user_id):
            pending = set(
                ScheduledSend.objects.filter(
                    user_id=change.user_id, outcome__isnull=True
                ).values_list("subject_starts_at", flat=True)
            )
        if change.cancel:
            return change.old_start not in pending
        return change.new_start in pending and change.old_start not in pending

    def run(self) -> dict[str, Any]:
        from sweeps.materialize import run_materialize
        from sweeps.sync_changed import run_sync_changed

        plan = self.plan_changes()
        waiting: list[Change] = []
        done: list[Change] = []
        created = superseded = 0
        job_seconds: list[float] = []
        started = time.monotonic()
        for minute in range(MINUTES_PER_DAY):
            now = T0 + timedelta(minutes=minute)
            while plan and plan[0][0] <= now:
                at, provider, cal = plan.pop(0)
                change = self.apply(at, provider, cal, len(done) + len(waiting) + superseded)
                # A second change to a meeting before the first was seen: time the last.
                before = len(waiting)
                waiting = [
                    w
                    for w in waiting
                    if (w.provider, w.calendar, w.event_id) != (provider, cal, change.event_id)
                ]
                superseded += before - len(waiting)
                waiting.append(change)
                if change.old_start < change.at:
                    created += 1
            for fake in (self.google, self.graph):
                fake.push.clock = now
            job_started = time.monotonic()
            if minute % 15 == 0:
                run_materialize(now)
            if self.push:
                run_sync_changed(now)
            job = time.monotonic() - job_started
            job_seconds.append(job)
            still = []
            for change in waiting:
                if self.reflected(change):
                    change.reflected_after = (now - change.at).total_seconds() + job
                    done.append(change)
                else:
                    still.append(change)
            waiting = still
        return self.figures(
            done, waiting, created, superseded, time.monotonic() - started, job_seconds
        )

    def figures(
        self,
        done: list[Change],
        waiting: list[Change],
        created: int,
        superseded: int,
        seconds: float,
        job_seconds: list[float],
    ) -> dict[str, Any]:
        n = self.n
        google_api = [r for r in self.google.requests if r.path != "/token" and r.path != "/revoke"]
        graph_api = [r for r in self.graph.requests if not r.path.endswith("/token")]
        ics_full = sum(f.full_responses for f in self.feeds)
        ics_304 = sum(f.not_modified for f in self.feeds)
        result: dict[str, Any] = {
            "push": self.push,
            "connections_per_provider": n,
            "changes_applied": len(done) + len(waiting) + superseded,
            "of_which_new_meetings": created,
            "superseded_before_seen": superseded,
            "wall_seconds": round(seconds, 1),
            "per_connection_per_day": {
                "google_api": len(google_api) / n,
                "google_events_list": len(self.google.events_calls()) / n,
                "google_watch": len(self.google.watch_calls()) / n,
                "google_stop": len(self.google.stop_calls()) / n,
                "google_token": len(self.google.token_calls()) / n,
                "graph_api": len(graph_api) / n,
                "graph_calendar_view": len(self.graph.view_calls()) / n,
                "graph_subscriptions": len(self.graph.subscription_calls()) / n,
                "graph_token": len(self.graph.token_calls()) / n,
                "ics_200": ics_full / n,
                "ics_304": ics_304 / n,
            },
            "notifications_posted": len(self.google.push.posted) + len(self.graph.push.posted),
            "notifications_refused": sum(
                p.status not in (200, 202)
                for p in [*self.google.push.posted, *self.graph.push.posted]
            ),
            "never_reflected": len(waiting),
            "slowest_job_seconds": round(max(job_seconds), 2),
        }
        by_provider: dict[str, list[float]] = defaultdict(list)
        cancels_in_time = defaultdict(lambda: [0, 0])
        for change in done:
            by_provider[change.provider].append(change.reflected_after or 0.0)
            if change.cancel:
                fire = change.old_start - LEAD
                cancels_in_time[change.provider][1] += 1
                reflected_at = change.at + timedelta(seconds=change.reflected_after or 0)
                cancels_in_time[change.provider][0] += reflected_at < fire
        result["freshness_seconds"] = {
            provider: {
                "changes": len(values),
                "p50": round(statistics.median(values), 1),
                "p95": round(_percentile(values, 0.95), 1),
                "max": round(max(values), 1),
            }
            for provider, values in sorted(by_provider.items())
        }
        result["cancellations_withdrawn_before_their_nudge"] = {
            p: f"{ok}/{total}" for p, (ok, total) in sorted(cancels_in_time.items())
        }
        return result


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def cancelled_three_minutes_before(app_url: str) -> dict[str, Any]:
    """The issue's case, through deliver: a meeting cancelled 3 minutes before its nudge."""
    from django.conf import settings

    from scheduled_sends.models import ScheduledSend
    from sweeps.deliver import run_deliver
    from sweeps.materialize import run_materialize
    from sweeps.sync_changed import run_sync_changed
    from tenancy.scope import tenant_scope

    settings.NUDGE_CHANNEL_BACKENDS = {"console": "tests.support.recording.RecordingChannel"}
    day = Day(10, 0, 0, True, app_url, "cancel")
    day.setup()
    try:
        run_sync_changed(T0)
        run_materialize(T0)
        cases = []
        for (provider, cal), starts in day.starts.items():
            if provider != "ics":
                uid, start = min(starts.items(), key=lambda kv: kv[1])
                cases.append((start - LEAD - timedelta(minutes=3), provider, cal, uid, start))
        # In time order, every case of a minute cancelled before that minute's jobs run
        # (Google's and Graph's calendar N share their meeting times).
        cases.sort()
        queued_before = sent = 0
        for _at, provider, cal, _uid, start in cases:
            user_id = day.users[(provider, cal)]
            with tenant_scope(user_id):
                rows = ScheduledSend.objects.filter(user_id=user_id, subject_starts_at=start)
                queued_before += rows.exists()
        by_minute: dict[datetime, list[tuple]] = defaultdict(list)
        for case in cases:
            by_minute[case[0]].append(case)
        for at, group in sorted(by_minute.items()):
            for _at, provider, cal, uid, _start in group:
                day.apply(at, provider, cal, 4, target=uid)  # number 4: a cancellation
            run_sync_changed(at.replace(second=0, microsecond=0) + timedelta(minutes=1))
            run_deliver(at + timedelta(minutes=3))
        for _at, provider, cal, _uid, start in cases:
            user_id = day.users[(provider, cal)]
            with tenant_scope(user_id):
                sent += ScheduledSend.objects.filter(
                    user_id=user_id, subject_starts_at=start, outcome="sent"
                ).count()
        cases = len(cases)
        return {"cases": cases, "queued_before_the_cancel": queued_before, "sent": sent}
    finally:
        day.stop()


# --- Part 2: syncToken / delta against the window ---------------------------------------


def incremental_vs_window(changes: int = 10) -> dict[str, Any]:
    """Calls and bytes per change: the window re-query, Google syncToken, Graph delta."""
    import requests

    from tests.fakes.google_server import FakeGoogle, google_event
    from tests.fakes.microsoft_server import FakeGraph, graph_event

    meetings = _meetings(0, days=30)
    series = [
        (f"daily{s}_{d}", T0 + timedelta(days=d, hours=9 + s)) for s in (0, 1) for d in range(365)
    ]
    window = (T0 - timedelta(minutes=30), T0 + timedelta(hours=3 + 24 + 6))
    out: dict[str, Any] = {}
    with FakeGoogle() as google, FakeGraph() as graph:
        google.events["cal"] = [
            google_event(uid, s, s + timedelta(minutes=30)) for uid, s in meetings + series
        ]
        graph.calendars["cal"] = [
            graph_event(uid, s, s + timedelta(minutes=30)) for uid, s in meetings + series
        ]
        g_token, _ = google.issue_tokens()
        m_token, _ = graph.issue_tokens()
        g_url = f"{google.api_base_url}/calendars/cal/events"
        m_url = f"{graph.graph_base_url}/me/calendars/cal/calendarView"

        def get(url: str, token: str, params: dict[str, str] | None = None) -> requests.Response:
            return requests.get(
                url,
                params=params,
                headers={"Authorization": f"Bearer {token}", "Prefer": 'outlook.timezone="UTC"'},
                timeout=10,
            )

        g_window = {
            "timeMin": window[0].isoformat(),
            "timeMax": window[1].isoformat(),
            "singleEvents": "true",
            "maxResults": "2500",
        }
        m_window = {
            "startDateTime": window[0].isoformat(),
            "endDateTime": window[1].isoformat(),
            "$top": "500",
        }
        # Delta is pinned to a fixed range for a round; a week covers the sweep's window
        # for days before the round must start again.
        m_delta_range = {
            "startDateTime": window[0].isoformat(),
            "endDateTime": (window[0] + timedelta(days=8)).isoformat(),
        }
        g_full = get(g_url, g_token, {"singleEvents": "true", "maxResults": "2500"})
        sync_token = g_full.json()["nextSyncToken"]
        m_full = get(f"{m_url}/delta", m_token, m_delta_range)
        delta_link = m_full.json()["@odata.deltaLink"]
        sizes = defaultdict(list)
        rng = random.Random(3)
        for number in range(changes):
            uid, start = meetings[rng.randrange(0, 8)]
            moved = start + timedelta(minutes=15 * (number + 1))

            def move_g(events: list[dict[str, Any]], uid=uid, moved=moved) -> None:
                for e in events:
                    if e["id"] == uid:
                        e["start"] = {"dateTime": moved.isoformat(), "timeZone": "UTC"}

            def move_m(events: list[dict[str, Any]], uid=uid, moved=moved) -> None:
                for e in events:
                    if e["id"] == uid:
                        e["_start"] = moved

            google.change(move_g, "cal")
            graph.change(move_m, calendar="cal")
            sizes["google_window"].append(len(get(g_url, g_token, g_window).content))
            incremental = get(g_url, g_token, {"singleEvents": "true", "syncToken": sync_token})
            sync_token = incremental.json()["nextSyncToken"]
            sizes["google_sync_token"].append(len(incremental.content))
            sizes["graph_window"].append(len(get(m_url, m_token, m_window).content))
            delta = requests.get(
                delta_link,
                headers={"Authorization": f"Bearer {m_token}", "Prefer": 'outlook.timezone="UTC"'},
                timeout=10,
            )
            delta_link = delta.json()["@odata.deltaLink"]
            sizes["graph_delta"].append(len(delta.content))
        out["calendar"] = {
            "events_in_window": len(get(g_url, g_token, g_window).json()["items"]),
            "events_in_the_future": len(meetings) + len(series),
        }
        out["initial_bytes"] = {
            "google_sync_token_full_sync": len(g_full.content),
            "graph_delta_round_start (8 days)": len(m_full.content),
        }
        out["calls_per_change"] = {name: 1 for name in sizes}
        out["bytes_per_change_mean"] = {
            name: round(statistics.mean(values)) for name, values in sizes.items()
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=100, help="per provider")
    parser.add_argument("--changes-per-day", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--json", default="", help="write the figures here too")
    parser.add_argument("--skip-off", action="store_true", help="only the push-on day")
    parser.add_argument(
        "--parts", default="incremental,day,cancel", help="comma-separated subset to run"
    )
    args = parser.parse_args()

    env.setup_django()
    from cryptography.fernet import Fernet
    from django.conf import settings

    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
    settings.SECURE_SSL_REDIRECT = False
    settings.CALENDAR_HTTP_TIMEOUT_SECONDS = 5.0
    name = env.create_bench_database()
    print(f"bench database {name}")
    from tests.calendars.push_support import serve_app

    results: dict[str, Any] = {"args": vars(args)}
    with serve_app() as app_url:
        parts = set(args.parts.split(","))
        if "incremental" in parts:
            results["incremental_vs_window"] = incremental_vs_window()
            print(json.dumps(results["incremental_vs_window"], indent=2))
        days = (False, True) if not args.skip_off else (True,)
        for push in days if "day" in parts else ():
            label = "on" if push else "off"
            day = Day(args.connections, args.changes_per_day, args.seed, push, app_url, label)
            day.setup()
            try:
                figures = day.run()
            finally:
                day.stop()
            results["push_on" if push else "push_off"] = figures
            print(json.dumps(figures, indent=2))
        if "cancel" in parts:
            results["cancelled_3_minutes_before"] = cancelled_three_minutes_before(app_url)
            print(json.dumps(results["cancelled_3_minutes_before"], indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
