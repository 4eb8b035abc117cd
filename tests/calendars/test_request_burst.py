"""A budget's burst: Google counts its quota over a sliding minute, not per second.

With a burst of N a budget whose slots went unused lets N requests go at once
and spaces the rest ``1/rate`` apart, so any T seconds hold at most
``N + rate x T`` — the generic cell rate algorithm. Checked on the budgets'
own statement (the real clock), and through the real Google client against the
fake Google, whose :class:`~tests.fakes.base.Quota` refuses what goes over a
sliding window.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from itertools import pairwise

import pytest
from django.db import connection as db_connection

from calendars.sync import Outcome
from core.config import NudgeConfig
from pacing.pacer import LEAD, Budget, ChannelPacer, reserve_slots, slow_down
from providers import google
from providers.base import ConnectionSnapshot, request_budgets
from tests.calendars.conftest import NOW, provider_snapshot, run_sync
from tests.fakes.base import Quota

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = re.compile(r"/events$")
# Two instants a slot apart differ by this much at least, mapped to this
# process's clock (float rounding of the database's microseconds).
SAME_INSTANT = 1e-3


def _config(**knobs: float) -> NudgeConfig:
    return NudgeConfig.from_settings().replace(**knobs)


def _gaps(instants: list[float]) -> list[float]:
    return [later - earlier for earlier, later in pairwise(instants)]


def _most_within(instants: list[float], window: float) -> int:
    """The most of ``instants`` any half-open ``window`` seconds hold."""
    instants = sorted(instants)
    most, low = 0, 0
    for high, at in enumerate(instants):
        while instants[low] <= at - window:
            low += 1
        most = max(most, high - low + 1)
    return most


def test_after_a_quiet_spell_a_burst_of_n_goes_at_once_and_the_next_is_a_slot_later():
    config = _config()
    budget = Budget("test-burst", 10.0, burst=5)

    asked = time.monotonic()
    grant = reserve_slots(config, [budget], 12, horizon=timedelta(seconds=2))["test-burst"]
    answered = time.monotonic()

    deadlines = grant.deadlines()
    assert len(deadlines) == 12
    # Five at once, as soon as the reservation's lead allows (the database's clock read
    # while it was asked; a loaded machine may take a while to answer) ...
    lead = LEAD.total_seconds()
    assert asked + lead - 0.01 <= deadlines[0] <= answered + lead + 0.01
    assert max(deadlines[:5]) - min(deadlines[:5]) < SAME_INSTANT
    # ... then one every 1/rate.
    assert _gaps(deadlines[4:]) == pytest.approx([0.1] * 7, abs=SAME_INSTANT)

    # Spent: the next caller has no burst left and gets the next slot in line. Each
    # reservation maps the database's clock to this process's within its round trip; asked
    # after the last slot, a stalled test would find the burst refilled.
    again = time.monotonic()
    following = reserve_slots(config, [budget], 1)["test-burst"]
    mapping = 0.01 + (answered - asked) + (time.monotonic() - again)
    assert following.opens_at >= deadlines[-1] + 0.1 - mapping
    if time.monotonic() < deadlines[-1]:
        assert following.opens_at == pytest.approx(deadlines[-1] + 0.1, abs=mapping)


def test_a_budget_without_a_burst_and_every_channel_stay_evenly_spaced(settings):
    config = _config()
    [even] = reserve_slots(config, [Budget("test-even", 10.0)], 6).values()
    assert _gaps(even.deadlines()) == pytest.approx([0.1] * 5, abs=SAME_INSTANT)

    settings.NUDGE_TELEGRAM_RATE = 25.0
    pacer = ChannelPacer(NudgeConfig.from_settings())
    asked = time.monotonic()
    deadlines = pacer.reserve("telegram", 10)
    assert deadlines[0] >= asked + LEAD.total_seconds() - 0.01
    assert _gaps(deadlines) == pytest.approx([0.04] * 9, abs=SAME_INSTANT)


def test_a_budget_new_to_the_database_costs_the_others_asked_with_it_no_slot():
    """A reservation naming a budget that has no row yet is made once its row exists:
    the budgets asked with it give one slot each, not one lost to the first try."""
    config = _config()
    known = Budget("test-known", 10.0)
    asked = time.monotonic()
    [first] = reserve_slots(config, [known], 1).values()
    again = time.monotonic()
    grants = reserve_slots(config, [known, Budget("test-new", 10.0)], 1)
    answered = time.monotonic()

    assert grants["test-new"].count == 1
    # The next slot in line (or, asked later than it, the lead from then), never one more:
    # each reservation maps the database's clock to this process's within its round trip.
    lead, mapping = LEAD.total_seconds(), 0.01 + answered - asked
    earliest = max(first.first + 0.1, again + lead)
    latest = max(first.first + 0.1, answered + lead)
    assert earliest - mapping <= grants["test-known"].first <= latest + mapping


def test_over_any_window_a_bursting_budget_grants_at_most_burst_plus_rate_times_window():
    rate, burst = 20.0, 10
    config = _config()
    budget = Budget("test-window", rate, burst=burst)
    deadlines: list[float] = []
    # Callers asking in turn, with quiet spells shorter and longer than the
    # burst takes to refill (0.45 s): what goes at once is what went unused.
    for pause in (0, 0, 0.05, 0.2, 0, 0.6, 0, 0, 0.1, 1.0, 0, 0):
        time.sleep(pause)
        grant = reserve_slots(config, [budget], 8)["test-window"]
        deadlines += grant.deadlines()
        time.sleep(max(0.0, grant.opens_at - time.monotonic()))

    for window in (0.1, 0.25, 0.5, 1.0, 2.0):
        # Shrunk by a hair: instants mapped from the database's clock per
        # reservation may be a millisecond apart from where the database put them.
        assert _most_within(deadlines, window - 0.005) <= burst + rate * window, window
    # The burst was used: a quarter of a second held more than evenly spaced
    # slots could (six).
    assert _most_within(deadlines, 0.25) >= burst


def test_a_budget_a_429_lowered_does_not_burst_until_its_rate_has_climbed_back():
    # 1 % off the ceiling, back at 100 % a minute: the ceiling again within 0.6 s.
    config = _config(pacing_backoff=0.99, pacing_recovery_per_minute=1.0)
    budget = Budget("test-lowered", 10.0, burst=5)
    reserve_slots(config, [budget], 1)
    assert slow_down(config, budget, 0.0) < 10.0

    lowered = reserve_slots(config, [budget], 4)["test-lowered"]
    assert _gaps(lowered.deadlines()) == pytest.approx([1 / lowered.rate] * 3, abs=SAME_INSTANT)
    assert lowered.rate < 10.0

    time.sleep(1.5)  # climbed back, and quiet for longer than the burst takes to refill
    recovered = reserve_slots(config, [budget], 7)["test-lowered"]
    assert recovered.rate == pytest.approx(10.0)
    deadlines = recovered.deadlines()
    assert max(deadlines[:5]) - min(deadlines[:5]) < SAME_INSTANT
    assert deadlines[5] - deadlines[4] == pytest.approx(0.1, abs=SAME_INSTANT)


def test_syncs_burst_under_googles_sliding_window_quota_without_a_429(
    settings, make_user, google_connection, fake_google
):
    # Scaled down: 10 a second plus a burst of 20 — at most 40 in any 2 s —
    # against a fake refusing more than 48 in any 2 s. Evenly spaced, 60
    # connections would take 6 s and no second would hold more than 11.
    settings.CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE = 600
    settings.CALENDAR_GOOGLE_PROJECT_BURST = 20
    fake_google.quota = Quota(limit=48, window=2.0, retry_after=1, paths=EVENTS)
    connections = [google_connection(make_user()) for _ in range(60)]

    def sync(user_id: int) -> str:
        try:
            [result] = run_sync(user_id).results
            return result.outcome
        finally:
            db_connection.close()  # this thread's own database connection

    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(sync, [c.user_id for c in connections]))

    assert outcomes == [Outcome.SYNCED] * 60
    assert fake_google.quota.refused == 0
    arrivals = [call.at for call in fake_google.events_calls()]
    assert len(arrivals) == 60
    assert _most_within(arrivals, 1.0) > 15


def _snapshot(user_id: int, access_token: str, config: NudgeConfig) -> ConnectionSnapshot:
    """One user's Google calendar as a sync hands it to the provider (tokens fresh)."""
    return provider_snapshot(
        "google",
        config,
        connection_id=user_id,
        user_id=user_id,
        calendar_id="primary",
        account="someone@example.com",
        allow_private_network=True,
        access_token=access_token,
        token_expires_at=NOW + timedelta(hours=1),
    )


def test_a_thousand_requests_at_once_with_the_defaults_are_not_held_to_the_rate_nor_refused(
    fake_google,
):
    # Google's published project quota, a sliding minute; every knob at its default.
    fake_google.quota = Quota(limit=10_000, window=60.0, retry_after=1, paths=EVENTS)
    config = NudgeConfig.from_settings()
    project = request_budgets("google", 1, config)[0]
    assert project.ceiling * 60 + project.burst <= 10_000
    access, _ = fake_google.issue_tokens()
    start, end = config.subject_window(NOW)

    def fetch(user_id: int) -> None:
        try:
            google.fetch(
                _snapshot(user_id, access, config), now=NOW, window_start=start, window_end=end
            )
        finally:
            db_connection.close()

    started = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(fetch, range(1, 1001)))

    assert fake_google.quota.refused == 0
    assert len(fake_google.events_calls()) == 1000
    # Evenly spaced at the project's rate (8,000 a minute) the thousand slots
    # would span 7.5 s, the next one no sooner than that after the start: how
    # fast the thousand went would then be the rate's doing, not this
    # machine's. With the burst the next slot is still well short of it.
    [after] = reserve_slots(config, [project], 1).values()
    assert after.first < started + 0.5 * 1000 / project.ceiling


def test_a_long_lived_process_keeps_only_so_many_budgets_in_mind(monkeypatch):
    """Every account has a budget of its own: a process running for days forgets which
    rows it has seen rather than hold them all, and a forgotten one still reserves."""
    from pacing import pacer

    monkeypatch.setattr(pacer, "SEEN_BUDGETS_KEPT", 3)
    config = _config()
    for n in range(10):
        [grant] = reserve_slots(config, [Budget(f"test-account-{n}", 10.0)], 1).values()
        assert grant.count == 1
        assert len(pacer._seen_budgets) <= 4
    [again] = reserve_slots(config, [Budget("test-account-0", 10.0)], 1).values()
    assert again.count == 1
