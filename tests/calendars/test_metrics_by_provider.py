"""/metrics says how each provider's calendars synced: one scrape, every machine's runs.

An operator paged for "calendars failing" first asks "which provider?": the sync
outcomes carry the provider, and the providers' shared request rates are there too.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from sweeps.materialize import run_materialize
from tests.calendars.conftest import make_connection
from tests.calendars.ics_samples import SINGLE
from tests.channels.test_metrics import SECRET, scrape, value

pytestmark = pytest.mark.django_db


def test_sync_outcomes_are_labelled_by_provider(
    client, settings, make_user, fake_ics, ics_connection, google_connection
):
    settings.METRICS_SECRET = SECRET
    fake_ics.body = SINGLE
    ics_connection()
    make_connection(
        make_user(),
        "ics",
        account="gone",
        calendar_id="",
        feed_url=fake_ics.feed_url + "-moved",  # 404: the user must give the new address
        allow_private_network=True,
    )
    google_connection()

    report = run_materialize(timezone.now())
    assert (report.calendars_synced, report.calendars_needing_reauth) == (2, 1), report.summary()

    metrics = scrape(client)
    syncs = metrics["nudge_calendar_syncs_last_15m"]
    assert value(syncs, provider="ics", outcome="synced") == 1
    assert value(syncs, provider="ics", outcome="needs_reauth") == 1
    assert value(syncs, provider="google", outcome="synced") == 1
    assert value(syncs, provider="google", outcome="needs_reauth") == 0
    # The Google project's shared rate in force, at its configured ceiling (no 429 yet).
    rate = value(metrics["nudge_pacing_rate_per_second"], budget="google")
    ceiling = value(metrics["nudge_pacing_ceiling_per_second"], budget="google")
    assert rate == pytest.approx(ceiling) and ceiling > 0
    # Per-user budgets would be a series per user: never exported.
    assert not [s for s in metrics["nudge_pacing_rate_per_second"] if ":" in s.labels["budget"]]
