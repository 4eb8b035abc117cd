"""Issue 34, item 5: /metrics has a read-only credential of its own.

It used to take the cron secret, which can also run ``POST /cron/deliver``: a
scraper's configuration held a key that sends messages. Now ``/metrics``
takes only ``METRICS_SECRET``, and that secret runs nothing.
"""

from __future__ import annotations

import pytest

from scheduled_sends.models import SweepRun

pytestmark = pytest.mark.django_db

CRON = "cron-secret-that-runs-the-sweeps-91ab"
METRICS = "metrics-secret-that-only-reads-5c2d"


@pytest.fixture(autouse=True)
def secrets(settings):
    settings.CRON_SECRET = CRON
    settings.METRICS_SECRET = METRICS
    settings.SECURE_SSL_REDIRECT = False


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_metrics_refuses_the_cron_secret(client):
    """issue 34 item 5 (/metrics uses the cron secret): the cron secret no longer
    opens /metrics; the metrics secret does."""
    refused = client.get("/metrics", headers=bearer(CRON))
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"nudge_" not in refused.content

    scraped = client.get("/metrics", headers=bearer(METRICS))
    assert scraped.status_code == 200
    assert b"nudge_queue_rows" in scraped.content


@pytest.mark.parametrize("route", ["/cron/deliver", "/cron/materialize"])
def test_the_metrics_secret_runs_no_sweep(client, route):
    """issue 34 item 5: the scraper's credential is read-only: it cannot run a sweep."""
    response = client.post(route, headers=bearer(METRICS))
    assert response.status_code == 401
    assert not SweepRun.objects.exists()


def test_an_empty_metrics_secret_turns_metrics_off(client, settings):
    """issue 34 item 5: like an empty CRON_SECRET for the cron routes; the cron secret
    does not stand in for it."""
    settings.METRICS_SECRET = ""
    for headers in ({}, bearer(CRON), bearer("")):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 403
        assert response.json() == {"ok": False, "error": "metrics are disabled"}


def test_the_metrics_secret_reads_health_details_too(client):
    """issue 34 item 5: /healthz's details are read-only as well; either operator
    secret shows them, a wrong one only the verdict."""
    for secret in (METRICS, CRON):
        assert "checks" in client.get("/healthz", headers=bearer(secret)).json()
    assert set(client.get("/healthz", headers=bearer("nope")).json()) == {"ok"}
