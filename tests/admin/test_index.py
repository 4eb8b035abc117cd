"""The admin index: the sweeps' health and the stuck-claims link with its count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import console.health
from core.config import NudgeConfig
from scheduled_sends.models import SweepRun
from tenancy.scope import current_scope

from .conftest import record_scopes

INDEX = reverse("admin:index")
STUCK_URL = reverse("admin:scheduled_sends_scheduledsend_changelist") + "?state=stuck"


@pytest.fixture
def queue(make_user, make_state_rows, make_send):
    alice, bob = make_user("alice"), make_user("bob")
    rows = make_state_rows(alice)
    other_stuck = make_send(
        bob,
        fire_at=timezone.now() - timedelta(minutes=2),
        claimed_at=timezone.now() - timedelta(hours=1),
        claim_token=rows["stuck"].claim_token,
    )
    return rows, other_stuck


def test_index_links_stuck_claims_with_their_count(staff_client, queue):
    rows, other_stuck = queue

    response = staff_client.get(INDEX)

    html = response.content.decode()
    assert f'href="{STUCK_URL.replace("&", "&amp;")}"' in html
    assert (
        "2 claims are older than the lease (5 minutes): the deliver run holding them died." in html
    )
    listed = staff_client.get(STUCK_URL).context["cl"].result_list
    assert {obj.pk for obj in listed} == {rows["stuck"].pk, other_stuck.pk}


def test_index_shows_the_health_report(staff_client, queue):
    SweepRun.objects.create(sweep="deliver", status="ok", as_of=timezone.now())

    response = staff_client.get(INDEX)

    health = response.context["nudge_health"]
    assert health.source == "check_health"
    assert health.figures["stuck_claims"] == 2
    assert health.figures["last_deliver_at"] is not None
    assert health.figures["last_materialize_at"] is None
    html = response.content.decode()
    assert "Needs attention:" in html  # no materialize run yet
    assert "Upcoming nudges are not being queued: no materialize run has succeeded yet." in html
    assert "Deliver is running: the last deliver run succeeded at" in html


def test_check_health_runs_outside_the_support_scope(staff_client, monkeypatch, db):
    """It opens its own scope for the queue counts, and scopes refuse to nest."""
    real = console.health.check_health
    scopes: list[str | None] = []

    def spy(now=None):
        scopes.append(current_scope())
        return real(now)

    monkeypatch.setattr(console.health, "check_health", spy)

    with record_scopes() as seen:
        assert staff_client.get(INDEX).status_code == 200

    assert scopes == [None]
    assert "rls_bypass()" in {scope for scope, _ in seen}
    assert "support_scope()" in {scope for scope, _ in seen}


def test_index_falls_back_to_its_own_queries_when_health_fails(staff_client, queue, monkeypatch):
    def broken(now=None):
        raise RuntimeError("boom")

    monkeypatch.setattr(console.health, "check_health", broken)

    response = staff_client.get(INDEX)

    health = response.context["nudge_health"]
    assert health.source == "admin queries"
    assert health.error == "check_health failed: RuntimeError"
    assert health.figures["stuck_claims"] == 2
    assert health.figures["due_backlog"] == 4  # both stuck, claimed, retrying; not pending
    html = response.content.decode()
    assert "State unknown: the health report could not be made" in html
    assert "2 claims are older than the lease." in html


def test_every_failing_check_reads_as_a_sentence_with_its_rows(db):
    """Each of health's checks, failing, as support reads it: the figure, and where to look."""
    from console.health import Check, HealthCheck
    from console.sentences import Links, health_lines

    names = list(Check)
    figures = {
        "overdue_unclaimed": 37,
        "stuck_claims": 1,
        "lateness_p95_bucket_seconds": 90.0,
        "sent_last_15_min": 1200,
        "expired_last_15_min": 3,
        "overdue_seen_by_materialize": 5,
        "last_deliver_at": timezone.now() - timedelta(minutes=9),
        "last_materialize_at": None,
    }
    checks = [HealthCheck(name, False, "the check's detail: why") for name in names]

    lines = {
        line.name: line
        for line in health_lines(
            checks, figures, Links(queue="/q/", runs="/r/"), NudgeConfig.from_settings()
        )
    }

    expected = {
        "overdue_unclaimed": ("37 nudges due over 2 minutes ago are unclaimed.", "/q/?due=overdue"),
        "stuck_claims": ("1 claim is older than the lease (5 minutes)", "/q/?state=stuck"),
        "nudges_on_time": (
            "95% of the 1,200 nudges sent in the last 15 minutes arrived within 90 s",
            "#lateness",
        ),
        "nothing_expired": ("3 nudges expired unsent in the last 15 minutes", "/q/?state=expired"),
        "delivery_keeping_up": (
            "5 nudges whose time had passed were still unsent",
            "/q/?due=overdue",
        ),
        "deliver_recent": (
            "Nudges are not being sent: no deliver run has succeeded since",
            "/r/?sweep__exact=deliver",
        ),
        "materialize_recent": (
            "Upcoming nudges are not being queued: no materialize run has succeeded yet.",
            "/r/?sweep__exact=materialize",
        ),
        "deliver_last_run": (
            "The last deliver run failed: why",
            "/r/?sweep__exact=deliver&status__exact=failed",
        ),
        "channels_configured": (
            "Sends are failing on our channel configuration — fix the setting named here: "
            "the check&#x27;s detail: why.",
            "/q/?failure_kind__exact=configuration",
        ),
        "sends_succeeding": (
            "Sends are failing: the check&#x27;s detail: why.",
            "/q/?state=failed",
        ),
    }
    for name, (words, link) in expected.items():
        assert words in lines[name].sentence, (name, lines[name].sentence)
        assert lines[name].link == link, name
    # Every check has its own sentence, failing and passing, and no code identifiers in it.
    assert set(lines) == set(Check)
    assert "_" not in "".join(line.sentence for line in lines.values())
    assert not any(line.ok for line in lines.values())
    passing = health_lines(
        [HealthCheck(name, True, "fine") for name in Check],
        {},
        Links(),
        NudgeConfig.from_settings(),
    )
    assert {line.name for line in passing} == set(Check)
    assert "_" not in "".join(line.sentence for line in passing)


def test_a_check_without_a_sentence_cannot_reach_the_page(db, monkeypatch):
    """A new check added to health without its sentence fails loudly, never falls back."""
    import enum

    from console import sentences
    from console.health import Check, HealthCheck

    extended = enum.StrEnum("Check", {m.name: m.value for m in Check} | {"NEW": "new_check"})
    monkeypatch.setattr(sentences, "Check", extended)
    with pytest.raises(LookupError, match="new_check"):
        sentences.health_lines(
            [HealthCheck(Check.STUCK_CLAIMS, True, "")],
            {},
            sentences.Links(),
            NudgeConfig.from_settings(),
        )
