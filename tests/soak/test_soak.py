"""The soak with faults: a short run in CI, a long one on demand.

    pytest tests/soak                         # 60 simulated minutes (+22 to settle), 40 tenants
    NUDGE_SOAK_MINUTES=240 pytest tests/soak -m slow   # the long run

``NUDGE_SOAK_TENANTS`` and ``NUDGE_SOAK_SEED`` change the long run's size and
seed. The counts print in the terminal summary (section "soak").
``NUDGE_SOAK_PROFILE=/some/prefix`` writes a cProfile file per worker run.
"""

from __future__ import annotations

import os
import time

import pytest

from tests.soak.harness import Soak, SoakConfig

pytestmark = pytest.mark.django_db(transaction=True)


def run_soak(config, make_user, fake_twilio, fake_telegram, tmp_path, soak_report, title):
    started = time.monotonic()
    soak = Soak(config, make_user, fake_twilio, fake_telegram, tmp_path)
    soak.seed()
    seeded = time.monotonic()
    soak.run()
    ran = time.monotonic()
    result = soak.check()
    result.counts["wall seconds (seed, run, check)"] = (
        f"{time.monotonic() - started:.1f} "
        f"({seeded - started:.1f}, {ran - seeded:.1f}, {time.monotonic() - ran:.1f})"
    )
    text = result.render(f"{title} (seed {config.seed})")
    soak_report.append(text)
    print(text)
    assert result.counts["duplicates"] == 0
    assert result.counts["lost"] == 0
    assert result.violations == []
    return result


@pytest.mark.timeout(240)
def test_soak_short(make_user, fake_twilio, fake_telegram, tmp_path, soak_report):
    result = run_soak(
        SoakConfig(), make_user, fake_twilio, fake_telegram, tmp_path, soak_report, "soak, short"
    )
    counts = result.counts
    # The faults really happened, or the proof proves nothing.
    assert counts["sent"] > 150
    assert counts["expired"] > 0 and counts["failed (provider refused)"] > 0
    assert counts["failed (interrupted mid-send)"] >= 2
    assert counts["failed (unconfirmed: timed out)"] >= 1
    assert counts["retried (attempts, all runs)"] > 20
    assert counts["episodes"].get("SIGKILL mid-batch") == 1
    assert counts["episodes"].get("pg_terminate_backend mid-run") == 1
    assert counts["episodes"].get("materialize overlap", 0) >= 1
    # Materialize participants share a cycle beside deliver workers; one is killed
    # holding a slice, which another takes over: the cycle completes, everyone visited.
    assert counts["episodes"].get("SIGKILL mid-cycle (materialize)") == 1
    assert counts["episodes"].get("sent beside the killed cycle", 0) > 0
    [killed] = counts["cycles with a participant killed"]
    assert killed["slices"] >= 8 and killed["done"] == killed["slices"]
    assert killed["taken over"] >= 1 and killed["users"] == counts["tenants"]
    assert sum(counts["mutations"].values()) >= 10
    assert counts["moved earlier by smoothing"] >= 5  # exactly once with smoothing, too


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.skipif(
    not os.environ.get("NUDGE_SOAK_MINUTES"), reason="set NUDGE_SOAK_MINUTES for the long soak"
)
def test_soak_long(make_user, fake_twilio, fake_telegram, tmp_path, soak_report):
    config = SoakConfig(
        minutes=int(os.environ["NUDGE_SOAK_MINUTES"]),
        tenants=int(os.environ.get("NUDGE_SOAK_TENANTS", "100")),
        seed=int(os.environ.get("NUDGE_SOAK_SEED", "1")),
    )
    run_soak(config, make_user, fake_twilio, fake_telegram, tmp_path, soak_report, "soak, long")
