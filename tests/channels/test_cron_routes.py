"""POST /cron/materialize, /cron/deliver and /cron/sync_changed: the sweeps and the minute
job behind a bearer secret."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.utils import timezone

from calendars.connect import add_ics_feed
from core.config import NudgeConfig
from scheduled_sends.models import MaterializeCycle, SweepRun
from tests.calendars.ics_samples import SINGLE
from tests.channels.queue import queue_follow_up, reload
from tests.fakes.ics_server import FakeIcsFeed

pytestmark = pytest.mark.django_db

SECRET = "cron-secret-for-tests-0123456789"
ROUTES = ["/cron/materialize", "/cron/deliver", "/cron/sync_changed"]


@pytest.fixture
def cron_secret(settings):
    settings.CRON_SECRET = SECRET
    return SECRET


def post(client, route: str, authorization: str | None = None):
    headers = {"Authorization": authorization} if authorization is not None else {}
    return client.post(route, secure=True, headers=headers)


def without_timing(summary: str) -> str:
    return re.sub(r"in \d+\.\ds", "in _s", summary)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer wrong", f"Basic {SECRET}", f"Bearer {SECRET}x", "Bearer ünï"],
)
def test_missing_or_wrong_secret_is_refused_and_runs_nothing(
    client, cron_secret, route, authorization
):
    response = post(client, route, authorization)
    assert response.status_code == 401
    assert response.json()["ok"] is False
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not SweepRun.objects.exists()


@pytest.mark.parametrize("route", ROUTES)
def test_empty_setting_disables_the_routes(client, settings, route):
    settings.CRON_SECRET = ""
    response = post(client, route, "Bearer ")
    assert response.status_code == 403
    assert response.json()["error"] == "cron routes are disabled"
    assert not SweepRun.objects.exists()


@pytest.mark.parametrize("route", ROUTES)
def test_only_post(client, cron_secret, route):
    response = client.get(route, secure=True, headers={"Authorization": f"Bearer {SECRET}"})
    assert response.status_code == 405
    assert not SweepRun.objects.exists()


def test_deliver_with_the_secret_sends_and_reports_like_the_command(
    client, cron_secret, recording_channel, make_user
):
    now = timezone.now()
    rows = [queue_follow_up(make_user(), f"Task {i}", now=now) for i in range(2)]

    response = post(client, "/cron/deliver", f"Bearer {SECRET}")
    body = response.json()
    assert response.status_code == 200, body
    assert body["ok"] is True
    assert (body["claimed"], body["sent"]) == (2, 2)
    assert all(reload(row).outcome == "sent" for row in rows)
    assert len(recording_channel.sent) == 2
    [run] = SweepRun.objects.all()
    assert (run.sweep, run.status) == ("deliver", "ok")
    assert body["summary"] == run.summary

    # With the queue now empty, the command and the route say the same thing.
    out = StringIO()
    call_command("deliver", stdout=out)
    again = post(client, "/cron/deliver", f"Bearer {SECRET}").json()
    assert without_timing(again["summary"]) == without_timing(out.getvalue().strip())


def test_materialize_with_the_secret_reports_like_the_command(client, cron_secret, make_user):
    make_user()
    out = StringIO()
    call_command("materialize", stdout=out)
    command_summary = out.getvalue().strip().splitlines()[-1]
    # Both join the cycle of their slot; start a fresh one, as the next slot would.
    MaterializeCycle.objects.all().delete()

    response = post(client, "/cron/materialize", f"bearer {SECRET}")  # the scheme is caseless
    body = response.json()
    assert response.status_code == 200, body
    assert body["ok"] is True
    assert without_timing(body["summary"]) == without_timing(command_summary)
    assert list(SweepRun.objects.values_list("sweep", "status")) == [
        ("materialize", "ok"),
        ("materialize", "ok"),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_minute_job_fetches_a_calendar_added_on_the_website(
    client, cron_secret, make_user, settings
):
    """A host whose only scheduler speaks HTTP runs the minute job too: without it a
    calendar added on the website would never be fetched."""
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
    user = make_user()
    with FakeIcsFeed() as feed:
        feed.body = SINGLE
        add_ics_feed(user.pk, feed.feed_url, allow_private=True, config=NudgeConfig.from_settings())
        response = post(client, "/cron/sync_changed", f"Bearer {SECRET}")
        assert len(feed.feed_calls()) == 1
    body = response.json()
    assert response.status_code == 200, body
    assert body["ok"] is True and body["connections"] == {"synced": 1}
    assert body["summary"].startswith("sync_changed: ")


def test_a_failed_run_answers_500(client, cron_secret, monkeypatch):
    import sweeps.cron_routes as cron_routes

    def broken(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(cron_routes, "run_deliver", broken)
    response = post(client, "/cron/deliver", f"Bearer {SECRET}")
    assert response.status_code == 500
    assert response.json() == {"ok": False, "summary": "deliver: failed (RuntimeError)"}


def test_a_run_that_reports_trouble_answers_500_with_its_report(client, cron_secret, monkeypatch):
    import sweeps.cron_routes as cron_routes
    from sweeps.deliver import DeliverReport

    report = DeliverReport(as_of=timezone.now(), claimed=1, lost_claims=1)
    monkeypatch.setattr(cron_routes, "run_deliver", lambda: report)
    response = post(client, "/cron/deliver", f"Bearer {SECRET}")
    body = response.json()
    assert response.status_code == 500
    assert body["ok"] is False
    assert body["lost_claims"] == 1
    assert body["summary"] == report.summary()
