"""The top of the hour: smoothing moves a burst earlier, the claim is fair within a
minute, every run says how late its nudges were, and health fails when they were late."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from accounts.models import DeliverySettings
from console.health import check_health
from core.config import NudgeConfig
from scheduled_sends.lateness import LatenessSummary, merged_p95
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from sweeps.smoothing import Move, plan_moves
from tenancy.scope import tenant_scope
from tests.conftest import utc
from tests.sweeps.factories import FIVE_A_MINUTE, add_event, add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 0)
HOUR = NOW + timedelta(hours=1)  # 15:00: everyone's meeting
INTENDED = HOUR - timedelta(minutes=10)  # the default lead
MINUTE = timedelta(minutes=1)


# --- the plan, as arithmetic ----------------------------------------------------


def test_plan_moves_the_excess_into_the_nearest_earlier_minutes_only():
    m = INTENDED
    moves = plan_moves({m: 23, m - MINUTE: 2}, capacity=5, first_open=NOW, max_early=6 * MINUTE)
    assert moves == [
        Move(m, m - MINUTE, 3),
        Move(m, m - 2 * MINUTE, 5),
        Move(m, m - 3 * MINUTE, 5),
        Move(m, m - 4 * MINUTE, 5),
    ]
    assert all(move.to < move.minute for move in moves)  # earlier, never later


def test_plan_never_moves_further_than_max_early_nor_into_an_open_minute():
    m = INTENDED
    capped = plan_moves({m: 100}, capacity=10, first_open=NOW, max_early=3 * MINUTE)
    assert [move.by for move in capped] == [MINUTE, 2 * MINUTE, 3 * MINUTE]
    assert sum(move.count for move in capped) == 30  # the rest stays: late is not an option
    near = plan_moves({m: 100}, capacity=10, first_open=m - MINUTE, max_early=6 * MINUTE)
    assert [move.to for move in near] == [m - MINUTE]


def test_a_minute_within_capacity_is_left_alone():
    assert plan_moves({INTENDED: 5}, capacity=5, first_open=NOW, max_early=6 * MINUTE) == []


# --- smoothing in materialize ---------------------------------------------------------


@pytest.fixture
def burst(make_user, settings):
    """20 users with a meeting at 15:00 on a channel that carries 5 nudges a minute."""
    settings.NUDGE_TELEGRAM_RATE = FIVE_A_MINUTE
    users = [
        make_user(channel="telegram", telegram_chat_id=str(9000 + i), timezone="Europe/Berlin")
        for i in range(20)
    ]
    for user in users:
        add_event(user, HOUR)
    return users


def _all_rows(users):
    return [row for user in users for row in rows(user)]


def test_materialize_spreads_a_burst_earlier_within_bounds(burst, settings):
    report = run_materialize(NOW)
    assert (report.queued, report.moved_earlier) == (20, 15)
    queue = _all_rows(burst)
    per_minute = Counter(row.fire_at for row in queue)
    assert per_minute == {INTENDED - k * MINUTE: 5 for k in range(4)}
    for row in queue:
        assert row.intended_at == INTENDED  # the nudge's instant is kept
        assert INTENDED - timedelta(minutes=settings.NUDGE_MAX_EARLY_MINUTES) <= row.fire_at
        assert row.fire_at <= row.intended_at  # earlier, never later


def test_re_materializing_reshuffles_nothing_and_duplicates_nothing(burst):
    run_materialize(NOW)
    before = {row.pk: row.fire_at for row in _all_rows(burst)}
    again = run_materialize(NOW + timedelta(minutes=15))
    assert (again.queued, again.moved_earlier) == (0, 0)
    assert {row.pk: row.fire_at for row in _all_rows(burst)} == before


def test_the_heaviest_users_extra_nudges_move_first(make_user, settings):
    settings.NUDGE_TELEGRAM_RATE = FIVE_A_MINUTE
    heavy = make_user(channel="telegram", telegram_chat_id="9100")
    light = [make_user(channel="telegram", telegram_chat_id=str(9200 + i)) for i in range(4)]
    for _ in range(4):
        add_follow_up(heavy, HOUR)
    for user in light:
        add_follow_up(user, HOUR)
    run_materialize(NOW)
    assert all(row.fire_at == INTENDED for user in light for row in rows(user))
    moved = [row for row in rows(heavy) if row.fire_at < row.intended_at]
    assert len(moved) == 3 and {row.user_rank for row in moved} == {1, 2, 3}


def test_a_moved_nudge_says_how_long_is_really_left(burst, recording_channel, settings):
    run_materialize(NOW)
    settings.NUDGE_TELEGRAM_RATE = 0  # the words are the question here, not the pacing
    earliest = INTENDED - 3 * MINUTE
    report = run_deliver(earliest)
    assert report.sent == 5
    assert {m.text for m in recording_channel.sent} == {
        "Design review starts at 16:00 (in 13 min)"  # Berlin; 3 min early, and says so
    }


def test_smoothing_can_be_turned_off(burst, settings):
    settings.NUDGE_MAX_EARLY_MINUTES = 0
    assert run_materialize(NOW).moved_earlier == 0
    assert {row.fire_at for row in _all_rows(burst)} == {INTENDED}


# --- fairness within a minute ---------------------------------------------------------


def test_every_users_first_nudge_of_a_minute_goes_before_anyones_second(make_user, settings):
    settings.NUDGE_MAX_NUDGES_PER_USER_MINUTE = 100  # the claim's order, not the caps
    heavy = make_user()
    others = [make_user() for _ in range(10)]
    for i in range(30):
        add_follow_up(heavy, HOUR + timedelta(seconds=i))
    for user in others:
        add_follow_up(user, HOUR + timedelta(seconds=59))
    run_materialize(NOW)
    config = NudgeConfig.from_settings()
    at = HOUR - timedelta(minutes=9)  # the whole minute is due
    first = transitions.claim_due(at, config, limit=11)
    assert {row.user_id for row in first} == {heavy.pk} | {user.pk for user in others}
    rest = transitions.claim_due(at, config, limit=100)
    assert len(rest) == 29 and {row.user_id for row in rest} == {heavy.pk}


def test_one_batch_comes_back_in_the_claims_fair_order(make_user, settings):
    settings.NUDGE_MAX_NUDGES_PER_USER_MINUTE = 100
    heavy = make_user()  # queued first: the lowest ids, the earliest seconds
    for i in range(30):
        add_follow_up(heavy, HOUR + timedelta(seconds=i))
    others = [make_user() for _ in range(10)]
    for user in others:
        add_follow_up(user, HOUR + timedelta(seconds=59))
    run_materialize(NOW)
    batch = transitions.claim_due(
        HOUR - timedelta(minutes=9), NudgeConfig.from_settings(), limit=100
    )
    assert len(batch) == 40
    # Delivery sends in this order: everyone's first before the heavy user's second.
    assert {row.user_id for row in batch[:11]} == {heavy.pk} | {u.pk for u in others}
    assert [row.user_rank for row in batch] == sorted(row.user_rank for row in batch)


# --- lateness ---------------------------------------------------------------------------


def test_each_run_records_how_late_its_nudges_were(make_user, recording_channel):
    user = make_user()
    add_event(user, HOUR)
    add_event(user, HOUR + timedelta(minutes=1))
    run_materialize(NOW)
    report = run_deliver(INTENDED + timedelta(minutes=1, seconds=20))
    assert report.sent == 2
    counts = SweepRun.objects.filter(sweep="deliver").latest("pk").counts
    assert counts["lateness_p50_seconds"] == 20.0  # the 14:51 nudge, 20 s late
    assert counts["lateness_max_seconds"] == 80.0
    assert counts["lateness_histogram"] == [[30, 1], [90, 1]]
    assert counts["rate_limited"] == 0 and counts["sends_per_second"] > 0
    assert "lateness p50 20.0s, p95 80.0s, max 80.0s" in report.summary()


def test_summaries_of_many_runs_add_up_to_a_p95():
    on_time = LatenessSummary.of([1.0] * 96 + [200.0] * 4).histogram
    assert merged_p95([on_time]) == 5
    late = LatenessSummary.of([1.0] * 90 + [200.0] * 10).histogram
    assert merged_p95([on_time, late]) == 300
    assert merged_p95([]) is None


def _deliver_run(at, **counts):
    SweepRun.objects.create(sweep="deliver", status="ok", as_of=at, counts=counts)


@pytest.mark.parametrize(
    ("latenesses", "expired", "failing"),
    [
        ([2.0] * 100, 0, set()),
        ([2.0] * 90 + [75.0] * 10, 0, {"nudges_on_time"}),
        ([2.0] * 100, 1, {"nothing_expired"}),
    ],
)
def test_health_fails_when_nudges_arrive_late_or_expire(db, latenesses, expired, failing):
    now = NOW + timedelta(minutes=30)
    histogram = LatenessSummary.of(latenesses).histogram
    _deliver_run(
        now - timedelta(minutes=5),
        sent=len(latenesses),
        expired=expired,
        lateness_histogram=histogram,
    )
    # Older than 15 minutes: does not count either way.
    _deliver_run(now - timedelta(minutes=20), sent=1, expired=9, lateness_histogram=[[None, 50]])
    report = check_health(now)
    checks = {check.name: check for check in report.checks}
    assert {name for name in ("nudges_on_time", "nothing_expired") if not checks[name].ok} == (
        failing
    )
    if "nudges_on_time" in failing:
        assert checks["nudges_on_time"].detail == (
            "Nudges are going out late: 95% of the 100 nudges sent in the last 15 minutes "
            "arrived within 90 s of their time (limit 60 s)."
        )


# --- caps: one tenant cannot flood the shared queue -----------------------------------


def test_a_flooding_user_is_capped_visibly_and_others_are_untouched(make_user, settings):
    settings.NUDGE_MAX_NUDGES_PER_USER_MINUTE = 10
    settings.NUDGE_MAX_NUDGES_PER_USER = 25
    flooder, neighbour = make_user(), make_user()
    add_event(flooder, HOUR, reminder_minutes=list(range(1, 181)))  # 180 alarms
    for second in range(50):
        add_follow_up(flooder, HOUR + timedelta(minutes=1, seconds=second))
    add_follow_up(neighbour, HOUR)
    report = run_materialize(NOW)

    queued = rows(flooder)
    assert len({row.intended_at for row in queued if row.kind == "event"}) == 5  # nearest 5 leads
    assert max(Counter(row.intended_at.replace(second=0) for row in queued).values()) <= 10
    assert len(queued) <= 25
    assert len(rows(neighbour)) == 1
    assert (report.capped_users, report.capped_nudges) == (1, 5 + 50 - len(queued))
    assert "capped" in report.summary()
    with tenant_scope(flooder.pk):
        settings_row = DeliverySettings.objects.get(user=flooder)
    assert (settings_row.capped_nudges, settings_row.capped_at) == (report.capped_nudges, NOW)
