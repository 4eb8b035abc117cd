"""The admin index: the sweeps' health and the stuck-claims link with its count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import console.health
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
    assert (health.error, health.verdict) == ("", "unhealthy")
    assert health.figures["stuck_claims"] == 2
    assert health.figures["last_deliver_at"] is not None
    assert health.figures["last_materialize_at"] is None
    html = response.content.decode()
    assert "Needs attention:" in html  # no materialize run yet
    assert "Upcoming nudges are not being queued: no materialize run has succeeded yet." in html
    assert "Deliver is running: the last deliver run succeeded less than a minute ago." in html


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
    assert health.verdict == "unknown"
    assert health.error == "check_health failed: RuntimeError"
    assert health.figures["stuck_claims"] == 2
    assert health.figures["due_backlog"] == 4  # both stuck, claimed, retrying; not pending
    html = response.content.decode()
    assert "State unknown: the health report could not be made" in html
    assert "2 claims are older than the lease (5 minutes): the deliver run" in html
    assert "4 nudges due and not yet sent." in html


def test_one_overdue_retry_reads_as_one_nudge_not_two(make_user, make_send):
    """A retry overdue is also waiting to be retried: the sentence must not add them."""
    from console.health import check_health

    make_send(make_user("alice"), fire_at=timezone.now() - timedelta(minutes=10), attempts=1)

    [line] = [c for c in check_health().checks if c.name == "overdue_unclaimed"]

    assert line.detail == (
        "1 nudge due over 2 minutes ago is unclaimed; of all due nudges, 1 is waiting to be "
        "retried."
    )


def test_every_failing_check_reads_as_a_sentence_with_its_rows(queue, make_user, make_send):
    """Each of health's checks, failing, as support reads it: the figure, and where to look."""
    from console.admin_site import Links, health_lines
    from console.health import check_health
    from scheduled_sends.lateness import LatenessSummary

    now = timezone.now()
    make_send(make_user("carol"), fire_at=now - timedelta(minutes=10))
    SweepRun.objects.create(
        sweep="materialize",
        status="ok",
        as_of=now - timedelta(hours=2),
        counts={"overdue_unclaimed": 5},
    )
    SweepRun.objects.create(
        sweep="deliver",
        status="ok",
        as_of=now - timedelta(minutes=9),
        counts={
            "sent": 1200,
            "expired": 3,
            "lateness_histogram": LatenessSummary.of([2.0] * 90 + [75.0] * 10).histogram,
            "sent_by_channel": {"whatsapp": 1200},
            "failures_by_channel": {"telegram": {"configuration": 2}, "whatsapp": {"refused": 500}},
            "configuration_errors": {"telegram": "TELEGRAM_BOT_TOKEN is not set"},
        },
    )
    SweepRun.objects.create(
        sweep="deliver", status="failed", as_of=now - timedelta(minutes=1), error="why"
    )

    report = check_health()
    lines = {line.name: line for line in health_lines(report.checks, Links("/q/", "/r/"))}

    expected = {
        "overdue_unclaimed": (
            "1 nudge due over 2 minutes ago is unclaimed; of all due nudges, 1 is waiting to "
            "be retried.",
            "/q/?due=overdue",
        ),
        "stuck_claims": (
            "2 claims are older than the lease (5 minutes): the deliver run holding them died.",
            "/q/?state=stuck",
        ),
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
            "Nudges are not being sent: no deliver run has succeeded for 9 minutes (the limit "
            "is 5 minutes).",
            "/r/?sweep__exact=deliver",
        ),
        "materialize_recent": (
            "Upcoming nudges are not being queued: no materialize run has succeeded for 2 hours",
            "/r/?sweep__exact=materialize",
        ),
        "deliver_last_run": (
            "The last deliver run failed: why",
            "/r/?sweep__exact=deliver&status__exact=failed",
        ),
        "channels_configured": (
            "Sends are failing on our channel configuration — fix the setting named here: "
            "telegram: TELEGRAM_BOT_TOKEN is not set (2 sends failed).",
            "/q/?failure_kind__exact=configuration",
        ),
        "sends_succeeding": (
            "Sends are failing: 500 of 1700 send attempts failed in the last 15 minutes",
            "/q/?state=failed",
        ),
    }
    for name, (words, link) in expected.items():
        assert words in lines[name].detail, (name, lines[name].detail)
        assert lines[name].link == link, name
        assert not lines[name].ok, name
    # Failing first, and no code identifiers in the sentences health writes itself.
    assert [line.ok for line in lines.values()] == sorted(line.ok for line in lines.values())
    own = [line.detail for line in lines.values() if line.name not in SETTING_NAMING]
    assert "_" not in "".join(own)


SETTING_NAMING = {"channels_configured", "calendar_push"}  # they name the setting to fix


def test_the_command_healthz_and_console_say_each_check_alike(
    staff_client, queue, capsys, settings
):
    """One sentence per check, made where the check is made: ``nudge_health``, the
    ``/healthz`` JSON and the console page read the same words."""
    from django.core.management import call_command
    from django.utils.html import escape

    SweepRun.objects.create(sweep="deliver", status="ok", as_of=timezone.now())
    with pytest.raises(SystemExit):
        call_command("nudge_health")
    printed = capsys.readouterr().out
    served = staff_client.get("/healthz").json()["checks"]
    html = staff_client.get(INDEX).content.decode()

    assert {check["name"] for check in served} >= {"stuck_claims", "materialize_recent"}
    for check in served:
        assert f"{check['name']}: {check['detail']}" in printed
        assert f'data-check="{check["name"]}">{escape(check["detail"])}' in html
        if check["name"] not in SETTING_NAMING:
            assert "_" not in check["detail"], check
