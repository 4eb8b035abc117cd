"""GET /metrics: what every machine's sweeps did, scraped as Prometheus would.

The body is parsed by ``prometheus_client``'s own parser, so a malformed
exposition fails here as it would fail a real scrape.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up
from tests.fakes import telegram_server as telegram

pytestmark = pytest.mark.django_db

SECRET = "metrics-secret-for-scrapes-0123456789"


@pytest.fixture
def metrics_secret(settings):
    settings.METRICS_SECRET = SECRET
    return SECRET


def scrape(client) -> dict[str, list]:
    response = client.get("/metrics", secure=True, headers={"Authorization": f"Bearer {SECRET}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        family.name: family.samples
        for family in text_string_to_metric_families(response.content.decode())
    }


def value(samples: list, **labels: str) -> float:
    """The samples with these labels, added up (none: 0)."""
    return sum(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.mark.parametrize("authorization", [None, "Bearer wrong"])
def test_without_the_metrics_secret_nothing_is_told(client, metrics_secret, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get("/metrics", secure=True, headers=headers)
    assert response.status_code == 401
    assert b"nudge_" not in response.content


def test_disabled_without_a_metrics_secret(client, settings):
    settings.METRICS_SECRET = ""
    settings.CRON_SECRET = "a-cron-secret-that-opens-no-metrics"
    assert client.get("/metrics", secure=True).status_code == 403
    headers = {"Authorization": "Bearer a-cron-secret-that-opens-no-metrics"}
    assert client.get("/metrics", secure=True, headers=headers).status_code == 403


def test_the_queue_runs_and_health_as_one_scrape(
    client, metrics_secret, recording_channel, make_user
):
    now = timezone.now()
    for i in range(2):
        queue_follow_up(make_user(), f"Due {i}", now=now)
    later = queue_follow_up(make_user(), "Later", now=now + timedelta(hours=1))
    channel = later.channel or "none"  # a row queued before its user chose a channel

    before = scrape(client)
    # Three rows wait on the console channel; nothing has run, so health fails.
    assert value(before["nudge_queue_rows"], state="pending", channel=channel) == 3
    assert value(before["nudge_health_check_ok"], check="deliver_recent") == 0
    assert value(before["nudge_health_ok"]) == 0
    assert value(before["nudge_lookahead_rows"], channel=channel) >= 1

    report = run_deliver()
    assert report.sent == 2

    after = scrape(client)
    assert value(after["nudge_queue_rows"], state="pending", channel=channel) == 1
    assert value(after["nudge_outcomes_last_15m"], outcome="sent") == 2
    assert value(after["nudge_sent_last_15m"]) == 2
    assert value(after["nudge_health_check_ok"], check="deliver_recent") == 1
    assert value(after["nudge_sweep_last_success_age_seconds"], sweep="deliver") < 60
    # The lateness histogram counts the two sends, cumulatively up to +Inf.
    buckets = [s for s in after["nudge_lateness_seconds_last_15m"] if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 2


def test_429s_lateness_and_the_rate_in_force_by_channel(
    client, metrics_secret, make_user, telegram_settings, fake_telegram
):
    telegram_settings.NUDGE_TELEGRAM_RATE = 10
    fake_telegram.plan.on_call(1, telegram.flood(1))
    now = timezone.now().replace(microsecond=0)
    user = make_user(channel="telegram", telegram_chat_id="840001")
    queue_follow_up(user, "Standup", now=now)

    report = run_deliver(budget_seconds=10)
    assert (report.rate_limited, report.sent) == (1, 1), report.summary()

    metrics = scrape(client)
    assert value(metrics["nudge_rate_limited_last_15m"], channel="telegram") == 1
    assert value(metrics["nudge_rate_limited_last_15m"], channel="whatsapp") == 0
    # The 429 lowered Telegram's rate for every process; it climbs back later.
    rate = value(metrics["nudge_pacing_rate_per_second"], budget="telegram")
    assert 0 < rate < value(metrics["nudge_pacing_ceiling_per_second"], budget="telegram")
    # The nudge went out about a second late (the 429's retry_after), on Telegram.
    buckets = [
        s
        for s in metrics["nudge_lateness_seconds_last_15m"]
        if s.name.endswith("_bucket") and s.labels["channel"] == "telegram"
    ]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 1
    late = metrics["nudge_lateness_seconds_last_15m_gsum"]  # the text format's own family
    assert [s.labels["channel"] for s in late] == ["telegram"] and late[0].value >= 0.9
