"""The admin landing page says each shared rate in force, and when a 429 lowered it."""

from __future__ import annotations

from django.urls import reverse

from core.config import NudgeConfig
from pacing.pacer import Budget, reserve_slots, slow_down

INDEX = reverse("admin:index")


def test_the_landing_page_shows_a_rate_a_429_lowered(staff_client, settings):
    settings.NUDGE_PACING_BACKOFF = 0.5
    config = NudgeConfig.from_settings()
    reserve_slots(config, [Budget("whatsapp", 60.0)], 1)
    slow_down(config, Budget("telegram", 25.0), 30.0)

    html = staff_client.get(INDEX).content.decode()

    assert "whatsapp paced at its configured 60.0/s." in html
    assert "telegram paced at 12.5/s of its configured 25.0/s: lowered by a 429" in html
    assert "Paused for 30 seconds more (Retry-After)." in html or "Paused for 29 seconds" in html


def test_the_headline_counts_health_checks_not_the_pacing_lines_beside_them(staff_client):
    config = NudgeConfig.from_settings()
    reserve_slots(config, [Budget("whatsapp", 60.0)], 1)
    reserve_slots(config, [Budget("telegram", 25.0)], 1)

    response = staff_client.get(INDEX)

    report = response.context["nudge_health"]
    assert report.verdict == "unhealthy"  # no sweep has run
    headline = f"Needs attention: {len(report.failing)} of {len(report.checks)} checks failing."
    assert headline in response.content.decode()
