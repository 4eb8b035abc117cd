"""Google and Graph requests are paced through the shared PostgreSQL budgets.

Real provider code against the fake Google and Graph servers, whose
:class:`~tests.fakes.base.Quota` answers 429 + ``Retry-After`` above a rate;
"every process" is a separate ``manage.py sync_calendars`` process sharing
nothing with the test but the database.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from django.db import connection as db_connection

from calendars.sync import Outcome
from core.config import NudgeConfig
from pacing.pacer import rates_in_force
from tests.calendars.conftest import NOW, TEST_KEY, reload, run_sync
from tests.fakes import google_server, microsoft_server
from tests.fakes.base import Quota
from tests.support.processes import manage, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = re.compile(r"/events$")


def _sync_process(fake_google, fake_graph) -> str:
    """``sync_calendars`` in a process of its own, against both fakes."""
    env = subprocess_env(
        CALENDAR_TOKEN_KEYS=TEST_KEY,
        CALENDAR_HTTP_TIMEOUT_SECONDS="5",
        GOOGLE_CLIENT_ID=google_server.CLIENT_ID,
        GOOGLE_CLIENT_SECRET=google_server.CLIENT_SECRET,
        GOOGLE_TOKEN_URL=fake_google.token_url,
        GOOGLE_API_BASE_URL=fake_google.api_base_url,
        MICROSOFT_CLIENT_ID=microsoft_server.CLIENT_ID,
        MICROSOFT_CLIENT_SECRET=microsoft_server.CLIENT_SECRET,
        MICROSOFT_TENANT=microsoft_server.TENANT,
        MICROSOFT_LOGIN_BASE_URL=fake_graph.login_base_url,
        MICROSOFT_GRAPH_BASE_URL=fake_graph.graph_base_url,
    )
    process = manage("sync_calendars", "--now", NOW.isoformat(), env=env)
    out, err = process.communicate(timeout=120)
    assert "connections:" in out, f"{out}\n{err}"
    return out


def _google_rate() -> tuple[float, float]:
    state = next(s for s in rates_in_force(NudgeConfig.from_settings()) if s.budget == "google")
    return state.rate, state.ceiling


def test_a_429_from_google_pauses_google_for_every_process_while_graph_goes_on(
    make_user, google_connection, graph_connection, fake_google, fake_graph
):
    fake_google.quota = Quota(limit=0, retry_after=60, paths=EVENTS)
    first = google_connection(make_user())
    second = google_connection(make_user())
    graph = graph_connection(make_user())

    [result] = run_sync(first.user_id).results
    assert result.outcome == Outcome.FAILED
    assert fake_google.quota.refused == 1
    rate, ceiling = _google_rate()
    assert rate < ceiling

    out = _sync_process(fake_google, fake_graph)

    # The other process asked Google nothing: its Google connection waits for
    # the pause to pass (tried again next cycle), its Graph connection synced.
    assert len(fake_google.events_calls()) == 1, out
    assert f"connection {second.pk} (google): failed, 0 calls" in out, out
    assert "rate limited" in reload(second).last_error
    assert f"connection {graph.pk} (microsoft): synced" in out, out
    assert len(fake_graph.view_calls()) == 1


def test_a_short_retry_after_is_waited_out_and_then_google_goes_on(
    make_user, google_connection, fake_google
):
    fake_google.quota = Quota(limit=0, retry_after=2, paths=EVENTS)
    first = google_connection(make_user())
    second = google_connection(make_user())
    [refused] = run_sync(first.user_id).results
    assert refused.outcome == Outcome.FAILED
    refused_at = fake_google.events_calls()[-1].at
    fake_google.quota = None

    [result] = run_sync(second.user_id).results

    assert result.outcome == Outcome.SYNCED
    # Retry-After is within the request's wait: it waited, and asked no sooner.
    assert fake_google.events_calls()[-1].at - refused_at >= 1.9


def test_concurrent_syncs_above_googles_quota_learn_its_rate(
    settings, make_user, google_connection, fake_google
):
    # Configured at twice the quota: a few 429s teach every thread the rate.
    settings.CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE = 600  # 10/s
    # This quota counts a sliding second: nothing to burst into.
    settings.CALENDAR_GOOGLE_PROJECT_BURST = 0
    settings.NUDGE_PACING_BACKOFF = 0.5
    fake_google.quota = Quota(limit=5, window=1.0, retry_after=1, paths=EVENTS)
    connections = [google_connection(make_user()) for _ in range(40)]

    def sync(user_id: int) -> tuple[str, str]:
        try:
            [result] = run_sync(user_id).results
            return result.outcome, result.message
        finally:
            db_connection.close()  # this thread's own database connection

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(sync, [c.user_id for c in connections]))

    # A few 429s taught every thread Google's rate: the rest were paced under it.
    refused = fake_google.quota.refused
    assert 1 <= refused <= 3, (refused, results)
    rate, ceiling = _google_rate()
    assert rate <= 0.5 * ceiling + 0.5
    # A connection either synced (one refused was asked again after its
    # Retry-After, in the same run) or, queued behind the lowered rate for longer
    # than a request may wait, was left for the next cycle without asking Google.
    synced = [r for r in results if r[0] == Outcome.SYNCED]
    waiting = [r for r in results if "no request slot" in r[1]]
    assert len(synced) + len(waiting) == 40, results
    assert len(synced) >= 25, results
    assert len([r for r in fake_google.events_calls() if not r.outcome]) == len(synced)


def test_a_request_to_an_idle_budget_goes_at_once(
    make_user, google_connection, fake_google, monkeypatch
):
    """A provider request takes its slot for now: a fetch thread is already there
    to send it, so nothing holds it back when the budgets are idle (the send
    slots' hand-over lead once held every such request back by 100 ms)."""
    from pacing import pacer

    slept: list[float] = []
    clock = SimpleNamespace(monotonic=time.monotonic, sleep=slept.append)
    monkeypatch.setattr(pacer, "time", clock)  # the pacer's own waits, nobody else's
    connection = google_connection(make_user())

    run_sync(connection.user_id)

    assert reload(connection).status == "active"
    assert slept == []
