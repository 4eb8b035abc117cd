"""The console's charts draw the figures of the rows behind them.

Rows with known lateness and outcomes go in (``console_data``); the tests
read back what the landing page and a user's page drew: each bar's value and
height, each point's value, and the same figures in the table behind it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from console import charts, panels, svgchart
from core.config import NudgeConfig
from core.display import when
from scheduled_sends import failures
from scheduled_sends.lateness import BUCKETS
from scheduled_sends.models import Kind, Outcome
from tenancy.scope import support_scope
from tests.conftest import new_user

from .console_data import (
    FAILURES,
    KNOWN_HOUR_AGO,
    KNOWN_OUTCOMES,
    SPIKE_TELEGRAM,
    TRICKLE_PER_MINUTE,
    Seeded,
    seed_console,
)

INDEX = reverse("admin:index")


def marks(html: str, chart_id: str, kind: str = "rect") -> list[dict[str, str]]:
    """The attributes of every drawn mark (bar or point) in one chart."""
    svg = re.search(rf'<svg[^>]* id="{chart_id}".*?</svg>', html, re.S)
    assert svg, f"no chart {chart_id}"
    found = []
    for tag in re.findall(rf"<{kind} class=\"(?:bar|point)\"[^>]*>", svg.group(0)):
        found.append(dict(re.findall(r'([\w-]+)="([^"]*)"', tag)))
    return found


def y_max(html: str, chart_id: str) -> float:
    return float(re.search(rf'id="{chart_id}"[^>]* data-y-max="([\d.]+)"', html).group(1))


@pytest.fixture(scope="class")
def seeded(django_db_setup, django_db_blocker) -> Iterator[tuple[Seeded, User, User]]:
    """A day of queue history (about 2,400 rows) made once for the tests that only
    read it: committed, and flushed after the last of them, as a transactional
    test's own rows are."""
    with django_db_blocker.unblock():
        alice, bob = new_user("alice"), new_user("bob")
        try:
            yield seed_console([alice.pk, bob.pk], timezone.now()), alice, bob
        finally:
            call_command("flush", interactive=False, verbosity=0)


class TestOneSeededDay:
    """What the landing page and a user's page draw of the same day of rows."""

    def test_look_ahead_draws_the_spike_against_capacity(self, staff_client, seeded):
        html = staff_client.get(INDEX).content.decode()

        (spike,) = marks(html, "lookahead-telegram")
        assert spike["data-value"] == str(SPIKE_TELEGRAM)
        top = y_max(html, "lookahead-telegram")
        assert top == 2000  # the axis rounds 1,800 up
        assert float(spike["height"]) == pytest.approx(SPIKE_TELEGRAM / top * svgchart.PLOT_HEIGHT)
        whatsapp = marks(html, "lookahead-whatsapp")
        assert len(whatsapp) == 179  # every minute after this one
        assert {bar["data-value"] for bar in whatsapp} == {str(TRICKLE_PER_MINUTE)}
        assert "1,800 nudges planned; busiest minute 1,800 against 1,045 a minute" in html
        assert "1 minute over capacity" in html
        # The capacity line, where smoothing levels a minute to.
        assert re.search(r'polyline class="line" data-series="capacity per minute"', html)

    def test_lateness_draws_percentiles_and_histogram(self, staff_client, seeded):
        data, _, _ = seeded
        html = staff_client.get(INDEX).content.decode()

        slot = int(
            (
                data.lateness_quarter
                - (charts.floor_to(data.now, charts.QUARTER) + charts.QUARTER - charts.HISTORY)
            )
            / charts.QUARTER
        )
        points = {
            p["data-series"]: p["data-value"]
            for p in marks(html, "lateness", "circle")
            if p["data-slot"] == str(slot)
        }
        # 1..10 s and 100 s: the median is 6 s; p95 interpolates 10 and 100.
        assert points == {"p50": "6", "p95": "55", "max": "100"}
        histogram = {
            bar["data-slot"]: bar["data-value"] for bar in marks(html, "lateness-histogram")
        }
        bounds = list(BUCKETS)
        # The 40 sends of the outcomes hour went out 2 s late.
        assert histogram == {
            str(bounds.index(5)): "45",
            str(bounds.index(10)): "5",
            str(bounds.index(120)): "1",
        }
        assert "worst quarter-hour p95 55 s" in html
        assert "0 quarter-hours over the 60 s limit" in html

    def test_outcomes_per_hour_and_failures_by_reason(self, staff_client, seeded):
        html = staff_client.get(INDEX).content.decode()

        slot = str(23 - KNOWN_HOUR_AGO)
        drawn = {
            b["data-series"]: b["data-value"]
            for b in marks(html, "outcomes")
            if b["data-slot"] == slot
        }
        assert drawn == {k: str(v) for k, v in KNOWN_OUTCOMES.items()}
        retried = [p for p in marks(html, "outcomes", "circle") if p["data-slot"] == slot]
        assert [p["data-value"] for p in retried] == ["13"]  # 6 sent + 7 failed had attempts > 0
        reasons = {b["data-series"]: b["data-value"] for b in marks(html, "failures")}
        # Grouped by the failure's kind, named once (failures.label), whatever last_error says.
        assert reasons == {failures.label(kind): str(n) for (kind, _), n in FAILURES.items()}
        assert (
            "The provider refused it: 4; No answer from the provider (may have been delivered): 3"
            in html
        )
        for _, raw in FAILURES:  # kinds only: a provider's text may quote a phone number
            assert raw.split("] ")[1] not in html

    def test_a_users_page_draws_only_their_rows(self, staff_client, support_user, seeded, caplog):
        _, alice, _bob = seeded
        url = reverse("admin:nudge_user_activity", args=[alice.pk])

        with caplog.at_level(logging.INFO, logger="nudge.admin.audit"):
            html = staff_client.get(url).content.decode()

        (audit,) = [r for r in caplog.records if r.name == "nudge.admin.audit"]
        assert (audit.staff_user_id, audit.filters["owner"]) == (support_user.pk, str(alice.pk))
        prefix = f"user{alice.pk}-"
        (spike,) = marks(html, f"{prefix}lookahead-telegram")
        assert spike["data-value"] == str(SPIKE_TELEGRAM // 2)  # round-robin over two users
        assert "capacity per minute" not in html  # one user never fills a channel
        sent = sum(
            int(b["data-value"])
            for b in marks(html, f"{prefix}outcomes")
            if b["data-series"] == "sent"
        )
        assert sent == (KNOWN_OUTCOMES["sent"] + 11) // 2
        their_rows = re.search(r'href="([^"]+)" id="nudge-user-queue-link"', html)
        listed = staff_client.get(their_rows.group(1).replace("&amp;", "&")).context["cl"]
        assert {row.user_id for row in listed.result_list} == {alice.pk}
        assert listed.has_active_filters
        assert listed.result_count < listed.full_result_count  # bob's rows are filtered out
        # Reachable from the user's row in the queue and in the delivery settings.
        queue = staff_client.get(reverse("admin:scheduled_sends_scheduledsend_changelist")).content
        assert f'href="{url}"'.encode() in queue
        delivery = staff_client.get(reverse("admin:accounts_deliverysettings_changelist"))
        assert f'href="{url}"'.encode() in delivery.content


def test_look_ahead_capacity_is_what_smoothing_levels_to(settings, db):
    """The line a spike is read against is the one smoothing moves nudges under: the
    planning rate (the adaptive pacer's mean under the setting: 0.95 of it with backoff
    0.9) over a deliver run's budget (at most the minute), less the headroom."""
    settings.NUDGE_TELEGRAM_RATE = 10
    settings.NUDGE_WHATSAPP_RATE = 2.5
    settings.NUDGE_RUN_BUDGET_SECONDS = 50
    settings.NUDGE_SMOOTHING_HEADROOM = 0.8
    look_ahead = charts.look_ahead(timezone.now(), NudgeConfig.from_settings())
    assert look_ahead.capacity["telegram"] == 380  # 10/s x 0.95 x 50 s x 0.8
    assert look_ahead.capacity["whatsapp"] == 95
    assert look_ahead.capacity.get("console") is None


def test_each_chart_lists_what_it_draws_as_its_table(settings):
    """A row per slot with a bar (or, without bars, a point), a column per series."""
    settings.NUDGE_TELEGRAM_RATE = 10
    start = datetime(2026, 12, 1, 10, tzinfo=UTC)
    config = NudgeConfig.from_settings()
    planned = charts.LookAhead(start, 3, {"telegram": [0, 7, 0]}, {"telegram": 380})
    (look_ahead,) = panels.look_ahead_panels(planned, prefix="", one_user=False)
    assert look_ahead.head == ["minute", "Telegram nudges", "capacity per minute"]
    assert look_ahead.rows == [[when(start + timedelta(minutes=1)), "7", "380"]]

    quarter = charts.LatenessQuarter(start, 12, 2.0, 54.46, 100.0)
    histogram = [(bound, 12 if bound == 5 else 0) for bound in BUCKETS]
    late, spread = panels.lateness_panels(
        charts.Lateness(3, {1: quarter}, histogram), config, prefix=""
    )
    assert late.head == ["quarter-hour from", "sent", "p50 (s)", "p95 (s)", "max (s)"]
    assert late.rows == [[when(start), "12", "2", "54.5", "100"]]
    assert spread.head == ["lateness", "nudges"]
    assert spread.rows == [["≤5s", "12"]]

    hours = [charts.OutcomeHour(start + timedelta(hours=i)) for i in range(3)]
    hours[1].counts.update({Outcome.SENT: 4, Outcome.FAILED: 1})
    hours[1].retried = 1
    hours[1].sent_by_kind[Kind.EVENT] = 4
    hours[1].failures["The provider refused it"] = 1
    outcomes, kinds, failed = panels.outcome_panels(hours, prefix="")
    assert outcomes.head == ["hour from", "sent", "skipped", "failed", "expired", "retried"]
    assert outcomes.rows == [[when(hours[1].start), "4", "0", "1", "0", "1"]]
    assert kinds.head == ["hour from", "Calendar event", "Follow-up", "Agenda"]
    assert kinds.rows == [[when(hours[1].start), "4", "0", "0"]]
    assert failed.head == ["hour from", "The provider refused it"]
    assert failed.rows == [[when(hours[1].start), "1"]]


def test_an_empty_queue_draws_empty_charts_in_words(staff_client, db):
    html = staff_client.get(INDEX).content.decode()

    for chart in ("lookahead-telegram", "lateness", "lateness-histogram", "outcomes", "failures"):
        assert re.search(rf'id="{chart}"[^>]* data-drawn="no"', html), chart
        assert marks(html, chart) == []
    assert "No nudges planned in the next 3 hours." in html
    assert "No nudges were sent in the last 24 hours." in html
    assert "No failures in the last 24 hours." in html


def test_rows_outside_the_windows_are_not_drawn(staff_client, make_user, make_send):
    alice = make_user("alice")
    now = timezone.now()
    make_send(alice, fire_at=now + timedelta(hours=3, minutes=5), channel="telegram")
    make_send(
        alice, fire_at=now - timedelta(hours=25), sent_at=now - timedelta(hours=25), outcome="sent"
    )

    html = staff_client.get(INDEX).content.decode()

    for chart in ("lookahead-telegram", "lateness", "outcomes"):
        assert marks(html, chart) == [], chart


def test_the_landing_page_costs_the_same_queries_whatever_the_queue(staff_client, make_user):
    """Pinned: health's reads, the charts' four grouped queries, the page's own."""
    with CaptureQueriesContext(connection) as empty:
        assert staff_client.get(INDEX).status_code == 200
    users = [make_user(f"u{n}").pk for n in range(5)]
    seed_console(users, timezone.now())
    with CaptureQueriesContext(connection) as full:
        assert staff_client.get(INDEX).status_code == 200

    assert len(full.captured_queries) == len(empty.captured_queries) == LANDING_QUERIES
    on_queue = [q["sql"] for q in full.captured_queries if 'FROM "scheduled_sends"' in q["sql"]]
    # Health's one count over the due range, and the charts' grouped queries.
    charted = [sql for sql in on_queue if '"due_backlog"' not in sql]
    assert len(on_queue) - len(charted) == 1
    assert len(charted) == CHART_QUERIES, charted


# Session and user; health (its row-level-security check reads roles and
# policies, about 25 catalog statements, the deployed policies of every tenant
# table and partition in one; run log, lateness runs, queue counts, the queue's
# partitions); the scopes; the four chart queries; the shared rates in force. A
# new query here is a decision (the end-user area's three tenant tables added
# three, account notices one; issue 25's day partitions, which must not cost a
# query each, made the policy reads one query: -7, and health's partition check +1;
# the planner's policy made a third kind of tenant table the check renders: +9;
# calendars added and waiting for the minute job are counted without push too: +1;
# the viewing staff member's own zone, read for every admin page: +1; the RLS
# check finds tenant tables and their partitions in one catalog query: -1).
LANDING_QUERIES = 56
CHART_QUERIES = 4  # look-ahead, lateness per quarter, lateness histogram, outcomes


def test_a_users_page_needs_the_queue_permission(client, make_user, viewer_user, db):
    alice = make_user("alice")
    url = reverse("admin:nudge_user_activity", args=[alice.pk])
    nobody = make_user("staff-without-queue")
    nobody.is_staff = True
    nobody.save()

    client.force_login(nobody)
    assert client.get(url).status_code == 403
    client.force_login(viewer_user)  # may view the queue
    assert client.get(url).status_code == 200
    missing = reverse("admin:nudge_user_activity", args=[alice.pk + 1000])
    assert client.get(missing).status_code == 404


def test_lateness_is_measured_from_the_intended_instant(staff_client, make_user, make_send):
    """A smoothed send (fire_at moved earlier) is late by sent_at - intended_at only."""
    alice = make_user("alice")
    now = timezone.now()
    intended = charts.floor_to(now, charts.QUARTER) - timedelta(hours=1) + timedelta(minutes=1)
    moved = make_send(
        alice,
        intended_at=intended,
        fire_at=intended - timedelta(minutes=4),
        sent_at=intended + timedelta(seconds=3),
        outcome="sent",
    )
    make_send(  # sent a little early: on time, in the first bucket
        alice,
        intended_at=intended,
        fire_at=intended - timedelta(minutes=5),
        sent_at=intended - timedelta(minutes=2),
        outcome="sent",
    )

    with support_scope():
        data = charts.lateness(now, NudgeConfig.from_settings())
        outcomes = charts.outcomes(now, NudgeConfig.from_settings())

    (quarter,) = data.by_quarter.values()
    assert quarter.start == charts.floor_to(intended, charts.QUARTER)
    assert (quarter.sent, quarter.max) == (2, 3.0)
    assert dict(data.histogram)[0] == 1 and dict(data.histogram)[5] == 1
    (hour,) = [h for h in outcomes if h.counts]
    assert hour.start == charts.floor_to(moved.intended_at, timedelta(hours=1))
