"""The soak's fixtures, and its counts in pytest's terminal summary (no ``-s`` needed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fixtures import fake_telegram, fake_twilio  # noqa: F401 — fixtures

REPORTS: list[str] = []


@pytest.fixture
def soak_report() -> Iterator[list[str]]:
    yield REPORTS


def pytest_terminal_summary(terminalreporter) -> None:
    if REPORTS:
        terminalreporter.section("soak")
        for report in REPORTS:
            terminalreporter.write_line(report)
