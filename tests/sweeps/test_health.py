"""A quiet minute and an outage must never look the same."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from console.health import check_health
from core.config import NudgeConfig
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.conftest import utc
from tests.sweeps.factories import add_event

NOW = utc(2026, 12, 2, 10, 0)
FIRE = NOW + timedelta(minutes=50)


def failing(report) -> set[str]:
    return {check.name for check in report.checks if not check.ok}


@pytest.fixture
def queued(make_user, recording_channel):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    return user


def test_a_quiet_minute_is_healthy(queued):
    run_deliver(NOW + timedelta(minutes=1))
    report = check_health(NOW + timedelta(minutes=2))
    assert report.ok, report.checks
    assert report.figures["due_backlog"] == 0


def test_a_bypass_that_is_never_set_is_reported_not_mistaken_for_quiet(
    queued, recording_channel, monkeypatch
):
    """The production failure: the claim ran without the bypass, matched
    nothing, succeeded, and every run reported "0 due"."""

    @contextmanager
    def bypass_never_set():
        with transaction.atomic():
            yield

    monkeypatch.setattr(transitions, "rls_bypass", bypass_never_set)
    for minute in range(50, 56):
        report = run_deliver(NOW + timedelta(minutes=minute))
        assert (report.claimed, report.ok) == (0, True)  # byte-identical to a quiet minute
    assert recording_channel.sent == []
    # The queue counts go through the same broken bypass and also see nothing…
    health = check_health(NOW + timedelta(minutes=56))
    assert health.figures["overdue_unclaimed"] == 0
    # …but materialize looks inside each user's own scope, and sees the rows.
    run_materialize(NOW + timedelta(minutes=55))
    health = check_health(NOW + timedelta(minutes=56))
    assert not health.ok
    assert "delivery_keeping_up" in failing(health)
    assert "the claim cannot see the queue" in next(
        c.detail for c in health.checks if c.name == "delivery_keeping_up"
    )


def test_overdue_rows_are_reported_when_deliver_stopped(queued):
    run_deliver(NOW)  # deliver ran once, then its cron stopped
    report = check_health(FIRE + timedelta(minutes=6))
    assert {"deliver_recent", "overdue_unclaimed"} <= failing(report)
    assert report.figures["overdue_unclaimed"] == 1


def test_claims_older_than_the_lease_are_reported(queued):
    config = NudgeConfig.from_settings()
    transitions.claim_due(FIRE, config)  # a run that died after claiming
    run_deliver(FIRE + timedelta(minutes=1))
    report = check_health(FIRE + config.lease + timedelta(seconds=30))
    assert "stuck_claims" in failing(report)
    assert report.figures["stuck_claims"] == 1


def test_no_runs_at_all_is_unhealthy(db):
    assert {"deliver_recent", "materialize_recent"} <= failing(check_health(NOW))


def test_a_failed_last_run_is_reported(queued, monkeypatch):
    from sweeps import deliver

    def broken(*args, **kwargs):
        raise ConnectionError("database went away")

    monkeypatch.setattr(deliver.transitions, "claim_due", broken)
    with pytest.raises(ConnectionError):
        run_deliver(FIRE)
    report = check_health(FIRE)
    assert "deliver_last_run" in failing(report)


def test_rls_problems_make_health_fail(queued, as_owner):
    run_deliver(NOW)
    as_owner(
        "ALTER TABLE calendar_events NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE calendar_events FORCE ROW LEVEL SECURITY",
    )
    assert "row_level_security" in failing(check_health(NOW + timedelta(minutes=1)))


def test_the_command_exits_non_zero_when_unhealthy(db, capsys):
    with pytest.raises(SystemExit) as exit_info:
        call_command("nudge_health", "--now", NOW.isoformat())
    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    said = "Nudges are not being sent: no deliver run has succeeded yet."
    assert f"FAIL deliver_recent: {said}" in out
    assert out.rstrip().endswith("UNHEALTHY")


CRON = "a-cron-secret-for-health"


def test_healthz_tells_an_anonymous_caller_only_ok_or_not(client, db, settings):
    """Check text names roles, tables and error classes; figures describe the queue."""
    settings.CRON_SECRET = CRON
    response = client.get("/healthz", secure=True)
    assert response.status_code == 503
    assert response.json() == {"ok": False}
    wrong = client.get("/healthz", secure=True, headers={"Authorization": "Bearer nope"})
    assert wrong.json() == {"ok": False}


def test_healthz_answers_503_with_the_failing_checks_to_the_cron_caller(client, db, settings):
    settings.CRON_SECRET = CRON
    response = client.get("/healthz", secure=True, headers={"Authorization": f"Bearer {CRON}"})
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False
    assert {c["name"] for c in body["checks"] if not c["ok"]} >= {"deliver_recent"}
    assert "due_backlog" in body["figures"]


def test_healthz_shows_details_to_staff_but_not_to_other_users(client, db, django_user_model):
    user = django_user_model.objects.create_user("someone")
    client.force_login(user)
    assert client.get("/healthz", secure=True).json() == {"ok": False}
    user.is_staff = True
    user.save()
    assert "checks" in client.get("/healthz", secure=True).json()


def test_healthz_answers_200_when_healthy(client, make_user, recording_channel):
    # On the real clock: a nudge queued an hour ahead, nothing late, nothing expired.
    add_event(make_user(), timezone.now() + timedelta(hours=1))
    run_materialize()
    run_deliver()
    response = client.get("/healthz", secure=True)
    assert response.status_code == 200
    assert response.json() == {"ok": True}


def test_what_materialize_saw_overdue_adds_up_over_every_participant_of_its_cycle(db):
    """Each participant of a shared cycle looks only at its own slices' users."""
    cycle = {"cycle": NOW.isoformat()}
    for overdue in (2, 3):
        SweepRun.objects.create(
            sweep=SweepRun.Sweep.MATERIALIZE,
            as_of=NOW,
            status=SweepRun.Status.OK,
            counts={**cycle, "overdue_unclaimed": overdue},
        )
    # Another cycle's run is not this one's participant.
    SweepRun.objects.create(
        sweep=SweepRun.Sweep.MATERIALIZE,
        as_of=NOW - timedelta(minutes=15),
        status=SweepRun.Status.OK,
        counts={"cycle": (NOW - timedelta(minutes=15)).isoformat(), "overdue_unclaimed": 7},
    )

    report = check_health(NOW + timedelta(minutes=1))

    assert report.figures["overdue_seen_by_materialize"] == 5
    assert "delivery_keeping_up" in failing(report)
