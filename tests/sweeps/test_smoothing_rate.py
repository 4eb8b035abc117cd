"""Issue 20, adaptive pacing: smoothing plans each minute with the rate the channel
will really carry — the adaptive pacer's mean under its ceiling, or the rate in force
a 429 lowered — so the last minute of a burst does not spill past its +1 edge."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from core.config import NudgeConfig
from pacing.pacer import Budget, channel_rates_in_force, slow_down
from sweeps.materialize import run_materialize
from tests.conftest import utc
from tests.sweeps.factories import add_event, rows

pytestmark = pytest.mark.django_db(transaction=True)

NOW = utc(2026, 12, 2, 14, 0)
INTENDED = NOW + timedelta(minutes=50)  # a meeting at 15:00, the default 10-minute lead
MINUTE = timedelta(minutes=1)
# 10.5 a minute at the pacer's mean (0.95 of the ceiling with backoff 0.9), over
# 55 s of a deliver run's budget with 0.9 headroom: 10 nudges a minute.
TEN_A_MINUTE = 10.5 / (0.95 * 55 * 0.9)


@pytest.fixture
def burst(make_user, settings):
    """20 users with a meeting at 15:00 on a channel that plans 10 nudges a minute."""
    settings.NUDGE_TELEGRAM_RATE = TEN_A_MINUTE
    settings.NUDGE_SMOOTHING_HEADROOM = 0.9  # the arithmetic above, whatever the default
    users = [make_user(channel="telegram", telegram_chat_id=str(9300 + i)) for i in range(20)]
    for user in users:
        add_event(user, NOW + timedelta(hours=1))
    return users


def _per_minute(users) -> Counter:
    return Counter(row.fire_at for user in users for row in rows(user))


def _provider_said_429(backoff: float) -> None:
    """What a deliver process does on a 429: the shared telegram rate drops by ``backoff``."""
    config = NudgeConfig.from_settings().replace(pacing_backoff=backoff)
    slow_down(config, Budget("telegram", config.rate("telegram")), 0.0)


def test_a_channel_never_limited_is_planned_at_the_pacers_mean_under_its_ceiling(burst):
    """Bullet "an adaptive shared pacer": configured at a provider's limit, the rate
    in force saws between backoff x and 1 x the setting; a minute is planned at the
    mean, not at the ceiling it only touches."""
    config = NudgeConfig.from_settings()
    assert config.planning_rate("telegram") == pytest.approx(TEN_A_MINUTE * 0.95)
    assert config.per_minute_capacity("telegram") == 10
    # At the ceiling itself this minute would have held 11 (10/s x 55 s x 0.9 = 495 would be
    # 11.05 here): the plan leaves the pacer's dips room.
    assert int(TEN_A_MINUTE * 55 * 0.9) == 11

    run_materialize(NOW)
    assert _per_minute(burst) == {INTENDED: 10, INTENDED - MINUTE: 10}


def test_a_lowered_rate_makes_the_next_materialize_spread_further(burst):
    """Bullet "a 429 lowers that channel's rate for every process": smoothing reads the
    rate in force from the shared pacing row, so after 429s found a lower limit the
    next materialize fills each minute only with what the channel now carries."""
    _provider_said_429(backoff=0.5)
    in_force = channel_rates_in_force(NudgeConfig.from_settings())["telegram"]
    assert in_force < TEN_A_MINUTE * 0.6  # halved, climbing back only slowly

    report = run_materialize(NOW)
    per_minute = _per_minute(burst)
    assert report.moved_earlier == 15
    assert per_minute == {INTENDED - k * MINUTE: 5 for k in range(4)}
    for user in burst:
        for row in rows(user):
            assert row.intended_at == INTENDED and row.fire_at <= row.intended_at


def test_a_rate_in_force_above_the_mean_does_not_raise_the_plan(burst):
    """A 429's dip that has mostly climbed back plans at the mean, never above it:
    the ceiling is the provider's limit or above, the dips will come again."""
    config = NudgeConfig.from_settings()
    assert config.planning_rate("telegram", TEN_A_MINUTE) == config.planning_rate("telegram")
    assert config.planning_rate("telegram", TEN_A_MINUTE / 2) == pytest.approx(TEN_A_MINUTE / 2)
    assert config.per_minute_capacity("console", 5.0) is None  # unpaced: nothing to plan
