"""Issue 24, "the first hour": the demo, the console's health and the development loop
as a new operator meets them."""

from __future__ import annotations

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from console.admin_site import Links, health_lines
from console.health import check_health
from core.config import NudgeConfig
from portal.timeline import upcoming
from scheduled_sends.models import ScheduledSend, SweepRun
from sweeps import dev_loop
from sweeps.deliver import run_deliver
from sweeps.demo import seed_demo
from sweeps.materialize import run_materialize
from tenancy.scope import support_scope, tenant_scope
from tests.conftest import utc
from tests.support.timeline import describe
from tests.sweeps.factories import add_event, add_follow_up

START = utc(2026, 12, 2, 8, 0, 30)


def _check(report, name: str):
    return next(check for check in report.checks if check.name == name)


def _demo(**sizes) -> None:
    config = NudgeConfig.from_settings()
    seed_demo(
        users=sizes.get("users", 3),
        events_per_user=sizes.get("events", 8),
        follow_ups_per_user=sizes.get("follow_ups", 3),
        channel="console",
        start=START,
        window=config.lookahead,
        default_lead=config.default_lead,
        due_now=1,
    )


def test_the_demo_queues_only_nudges_still_to_come(db, recording_channel):
    """Issue 24, the first hour: "the demo queues only future nudges" — a busier demo
    than the README's (8 events a user, some with their own 30-minute reminder) too."""
    _demo()
    assert run_materialize(START).queued > 0
    with support_scope():
        fire_times = list(ScheduledSend.objects.values_list("fire_at", flat=True))
    assert min(fire_times) >= START, [t for t in fire_times if t < START]


def test_the_console_is_green_after_the_readmes_first_command(db, recording_channel):
    """Issue 24, the first hour: "leaves the console green" after seed_demo, materialize
    and deliver; the demo's nudges that are due go at once, none late."""
    _demo()
    run_materialize(START)
    delivered = run_deliver(START + timedelta(seconds=3))
    assert delivered.sent == 3  # the "due now" follow-ups, one per user
    report = check_health(START + timedelta(seconds=10))
    assert [c for c in report.checks if not c.ok] == []
    lines = health_lines(report.checks, Links())
    assert [line.detail for line in lines if not line.ok] == []


@pytest.fixture
def seen_overdue(make_user, recording_channel):
    """A nudge whose time passed three minutes before the last materialize, unclaimed."""
    now = START
    user = make_user()
    add_follow_up(user, now + timedelta(minutes=7))  # its nudge fires at now - 3 min
    run_materialize(now - timedelta(minutes=5))
    run_deliver(now - timedelta(minutes=5))  # deliver ran before, then stopped
    run_materialize(now)
    assert (
        SweepRun.objects.filter(sweep="materialize").latest("as_of").counts["overdue_unclaimed"]
        == 1
    )
    return now


def test_the_keeping_up_check_clears_once_deliver_has_sent_them(seen_overdue):
    """Issue 24, the first hour: "health checks clear when their cause clears" — the
    "N nudges … still unsent and unclaimed" check does not stay red after deliver sent
    them, and says when it was last true."""
    now = seen_overdue
    assert not _check(check_health(now + timedelta(seconds=5)), "delivery_keeping_up").ok
    assert run_deliver(now + timedelta(seconds=10)).sent == 1
    report = check_health(now + timedelta(seconds=20))
    keeping_up = _check(report, "delivery_keeping_up")
    assert keeping_up.ok, keeping_up.detail
    [line] = [
        line for line in health_lines(report.checks, Links()) if line.name == "delivery_keeping_up"
    ]
    assert line.ok
    assert "Delivery has caught up: when the queue was last checked" in line.detail
    assert "1 nudge whose time had passed was unsent" in line.detail


def test_no_row_level_security_hint_when_deliver_simply_is_not_running(seen_overdue):
    """Issue 24, the first hour: "no hint pointing at row-level security when the cause
    is ordinary" — deliver stopped, and the queue counts see the overdue row too."""
    report = check_health(seen_overdue + timedelta(minutes=10))
    detail = _check(report, "delivery_keeping_up").detail
    assert not _check(report, "delivery_keeping_up").ok
    assert "row-level security" not in detail and "cannot see the queue" not in detail
    assert "deliver is not running" in detail


def test_home_does_not_call_a_passed_time_planned(make_user, recording_channel):
    """Issue 24, the first hour: "without a deliver every minute, Home must not list past
    times as planned" (portal/timeline.py)."""
    now = timezone.now()
    user = make_user()
    add_event(user, now + timedelta(minutes=8))  # its nudge was due 2 minutes ago
    add_event(user, now + timedelta(hours=1), title="Later")
    run_materialize(now - timedelta(minutes=5))
    with tenant_scope(user.pk):
        entries = upcoming(user.pk, now)
    assert [(e.title, describe(e)) for e in entries] == [
        ("Design review", "due, not sent yet"),
        ("Later", "planned"),
    ]


class _FakeTime(threading.Event):
    """The loop's clock and its wait: each wait moves the clock on, and stops it at ``until``;
    its time of day is ``stamp``'s."""

    def __init__(self, until: float, stamp=None) -> None:
        super().__init__()
        self.now, self.until = 0.0, until
        self.stamp = stamp or (lambda: f"t={self.now:.0f}")

    def monotonic(self) -> float:
        return self.now

    def strftime(self, _format: str) -> str:
        return self.stamp()

    def wait(self, timeout: float | None = None) -> bool:
        self.now += timeout or 0.0
        if self.now >= self.until:
            self.set()
        return self.is_set()


def test_run_sweeps_materializes_every_15_minutes_and_delivers_every_minute(monkeypatch):
    """Issue 24, the first hour: "a development loop (manage.py run_sweeps: materialize
    every 15 min and deliver every minute, in one process)" that stops cleanly."""
    time = _FakeTime(until=16 * 60 + 30)
    monkeypatch.setattr(dev_loop, "time", time)
    calls: list[tuple[str, float]] = []

    class Report:
        def __init__(self, name: str) -> None:
            calls.append((name, time.now))
            self.name = name

        def summary(self) -> str:
            return f"{self.name}: ok"

    lines: list[str] = []
    monkeypatch.setattr(dev_loop, "run_materialize", lambda: Report("materialize"))
    monkeypatch.setattr(dev_loop, "run_deliver", lambda: Report("deliver"))
    summary = dev_loop.run_sweeps(time, write=lines.append)
    assert [at for name, at in calls if name == "materialize"] == [0, 900]
    assert [at for name, at in calls if name == "deliver"] == [60.0 * m for m in range(17)]
    assert (summary["materialize"], summary["deliver"]) == (2, 17)
    assert lines[1] == "t=0 materialize: ok" and lines[2] == "t=0 deliver: ok"
    assert lines[-1] == "run_sweeps: stopped after 2 materialize, 17 deliver, 17 sync_changed runs"


def test_run_sweeps_sends_a_due_nudge_and_outlives_a_failing_sweep(
    make_user, recording_channel, monkeypatch
):
    """Issue 24, the first hour: the loop runs the real sweeps (a follow-up due now is
    sent) and a sweep that raises is a progress line, not the end of the loop."""
    user = make_user()
    add_follow_up(user, timezone.now() + timedelta(minutes=10, seconds=-30))
    time = _FakeTime(until=1, stamp=lambda: "12:00:00")
    monkeypatch.setattr(dev_loop, "time", time)

    def broken():
        raise RuntimeError("calendar provider down")

    lines: list[str] = []
    dev_loop.run_sweeps(time, write=lines.append)
    assert len(recording_channel.sent) == 1
    assert any(line.startswith("12:00:00 deliver: claimed 1, sent 1") for line in lines), lines
    more: list[str] = []
    monkeypatch.setattr(dev_loop, "time", again := _FakeTime(until=1))
    monkeypatch.setattr(dev_loop, "run_materialize", broken)
    dev_loop.run_sweeps(again, write=more.append)
    assert "materialize failed: RuntimeError: calendar provider down" in more[1]


def test_run_sweeps_refuses_outside_development(db, settings):
    """Issue 24, the first hour: run_sweeps is "development only — refuses outside
    development"."""
    settings.DEBUG = False
    settings.EMBEDDED_DATABASE = False
    with pytest.raises(CommandError, match="run_sweeps is for development only"):
        call_command("run_sweeps", stdout=StringIO())
