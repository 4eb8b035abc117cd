"""The point of the design, measured with the providers' own request logs.

One day of materialize runs at the 15-minute cadence, one user with one
connection of each provider: each connection costs at most one events/feed
call per run (96 a day) plus a token refresh per access-token lifetime (one
hour → at most 24 a day), against 1,440 calls a day for a design that asks
the provider every minute, per tenant, at delivery time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.calendars.conftest import NOW, run_sync
from tests.calendars.ics_samples import FEED
from tests.fakes.google_server import google_event
from tests.fakes.microsoft_server import graph_event

RUNS_PER_DAY = 24 * 60 // 15
PER_MINUTE_DESIGN = 24 * 60


def test_one_day_at_the_sweep_cadence(
    make_user,
    fake_google,
    fake_graph,
    fake_ics,
    google_connection,
    graph_connection,
    ics_connection,
):
    start = datetime(2026, 12, 2, 9, tzinfo=UTC)
    fake_google.events["primary"] = [
        google_event(
            f"g{i}", start + timedelta(hours=3 * i), start + timedelta(hours=3 * i, minutes=30)
        )
        for i in range(8)
    ]
    fake_graph.events = [
        graph_event(
            f"m{i}", start + timedelta(hours=3 * i), start + timedelta(hours=3 * i, minutes=30)
        )
        for i in range(8)
    ]
    fake_ics.body = FEED
    user = make_user()
    google_connection(user)
    graph_connection(user)
    ics_connection(user)

    summaries = [
        run_sync(user.pk, NOW + timedelta(minutes=15 * run)) for run in range(RUNS_PER_DAY)
    ]

    assert all(s.failed == 0 and s.needs_reauth == 0 for s in summaries)
    per_connection = {
        "google": (len(fake_google.events_calls()), len(fake_google.token_calls())),
        "microsoft": (len(fake_graph.view_calls()), len(fake_graph.token_calls())),
        "ics": (len(fake_ics.feed_calls()), 0),
    }
    print(f"\nprovider calls in one day at a 15-minute cadence (api, token): {per_connection}")
    for provider, (api, token) in per_connection.items():
        assert api == RUNS_PER_DAY, provider
        assert token <= 24, provider
        assert api + token <= RUNS_PER_DAY + 24 < PER_MINUTE_DESIGN
    # The sync's own count agrees with the providers': it counts requests, not intentions.
    assert sum(s.provider_calls for s in summaries) == sum(map(sum, per_connection.values()))
    # The feed is parsed once; every later run is a 304.
    assert (fake_ics.full_responses, fake_ics.not_modified) == (1, RUNS_PER_DAY - 1)
