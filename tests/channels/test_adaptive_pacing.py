"""A provider's 429 teaches every process a lower rate, which climbs back slowly.

The budgets live in PostgreSQL, so "every process" is checked with separate
``manage.py deliver`` processes against the fake Telegram (its flood control
answers 429 + ``retry_after`` above a quota) and, for the arithmetic, with
the budgets' own statements on the real clock.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from core.config import NudgeConfig
from pacing.pacer import MIN_RATE, Budget, rates_in_force, reserve_slots, slow_down
from tests.channels.queue import queue_follow_up
from tests.fakes.telegram_server import BOT_TOKEN, FakeTelegram
from tests.support.processes import manage, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)


def _config(**knobs: float) -> NudgeConfig:
    return NudgeConfig.from_settings().replace(**knobs)


def _rate(name: str, config: NudgeConfig | None = None) -> float:
    states = rates_in_force(config or NudgeConfig.from_settings())
    return next(state.rate for state in states if state.budget == name)


def test_a_429_lowers_the_rate_once_per_pause_and_it_climbs_back():
    config = _config(pacing_backoff=0.5, pacing_recovery_per_minute=0.6)
    budget = Budget("test-climb", 10.0)
    reserve_slots(config, [budget], 1)
    assert _rate("test-climb", config) == pytest.approx(10.0)

    lowered = slow_down(config, budget, 1.0)
    # Requests in flight when the limit was hit answer 429 together: one lowering.
    again = slow_down(config, budget, 1.0)
    assert lowered == pytest.approx(5.0, abs=0.1)
    assert again == pytest.approx(lowered, abs=0.1)

    # 60 % more a minute, compounding (x 1.6 ** (1/60) a second): two seconds
    # give back ~0.08 of the lowered 5/s — slowly, whatever the ceiling.
    time.sleep(2.0)
    climbed = _rate("test-climb", config)
    assert 5.05 < climbed < 5.2, climbed
    # A 429 after the pause is news: it lowers the rate again, from where it is.
    time.sleep(0.1)
    assert slow_down(config, budget, 0.0) == pytest.approx(climbed / 2, abs=0.15)


def test_the_rate_never_falls_below_the_minimum_nor_climbs_past_the_ceiling():
    config = _config(pacing_backoff=0.1, pacing_recovery_per_minute=1.0)
    budget = Budget("test-floor", 2.0)
    slow_down(config, budget, 0.0)
    time.sleep(1.1)
    slow_down(config, budget, 0.0)
    # 2 x 0.1 x 0.1 = 0.02/s is under the absolute minimum (not a share of the ceiling).
    assert MIN_RATE <= _rate("test-floor", config) < MIN_RATE * 1.05
    # Configured lower meanwhile: the stored lowered rate is capped by the new ceiling.
    state = reserve_slots(config, [Budget("test-floor", 0.03)], 1)["test-floor"]
    assert state.rate == pytest.approx(0.03)


def test_retry_after_holds_every_caller_off_the_budget():
    config = _config()
    budget = Budget("test-pause", 100.0)
    slow_down(config, budget, 2.0)
    asked = time.monotonic()
    # Another caller (another process: the row is all they share) asking for a
    # slot within a second gets none; asking within three gets one after the pause.
    assert reserve_slots(config, [budget], 1)["test-pause"].count == 0
    grant = reserve_slots(config, [budget], 1, horizon=timedelta(seconds=3))["test-pause"]
    assert grant.count == 1
    assert grant.first - asked >= 1.9


def _deliver(env: dict[str, str]) -> str:
    process = manage("deliver", env=env)
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, f"deliver failed:\n{out}\n{err}"
    return out


def _rate_in_summary(out: str) -> float:
    return float(re.search(r"rate telegram ([0-9.]+)/s", out)[1])


def test_a_rate_lowered_by_429s_in_one_process_holds_in_the_next(make_user):
    # Configured at twice what the provider allows: the first process learns it.
    limit, configured = 5, 10
    with FakeTelegram(max_per_second=limit, retry_after=1) as fake:
        now = timezone.now().replace(microsecond=0)
        first = [
            make_user(channel="telegram", telegram_chat_id=str(830_000 + i)) for i in range(50)
        ]
        for user in first:
            queue_follow_up(user, "Standup", now=now)
        env = subprocess_env(
            TELEGRAM_API_BASE_URL=fake.base_url,
            TELEGRAM_BOT_TOKEN=BOT_TOKEN,
            NUDGE_TELEGRAM_RATE=str(configured),
            NUDGE_PACING_BACKOFF="0.6",
            CHANNEL_TIMEOUT_SECONDS="5",
        )
        out = _deliver(env)
        assert "sent 50" in out, out
        floods_first = fake.flood_count()
        assert floods_first >= 1, out
        learned = _rate_in_summary(out)
        assert learned < configured, out
        # The test process (a third one) reads the same lowered rate.
        assert _rate("telegram") < configured

        second = [
            make_user(channel="telegram", telegram_chat_id=str(831_000 + i)) for i in range(30)
        ]
        for user in second:
            queue_follow_up(user, "Review", now=timezone.now().replace(microsecond=0))
        started = time.time()
        out = _deliver(env)
        assert "sent 30" in out, out
        # The second process starts at the lowered rate: it does not have to
        # hit the provider's limit again to learn it, so it seldom does.
        assert _rate_in_summary(out) < configured, out
        later = [d.at for d in fake.delivered if d.at >= started]
        assert len(later) == 30
        assert fake.flood_count() - floods_first <= 3, out
        # Spaced at the learned rate, not the configured one (which would take 2.9 s).
        assert max(later) - min(later) >= 0.8 * 29 / (learned + 0.5)
