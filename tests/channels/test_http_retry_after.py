"""The one Retry-After parser, shared by the calendar providers and the WhatsApp channel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from core.http_retry_after import MAX_RETRY_AFTER_SECONDS, parse_retry_after

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("120", 120), (" 7 ", 7), ("0", 0), ("1.5", 1.5)],
    ids=["seconds", "padded", "zero", "fraction"],
)
def test_delay_seconds_are_waited_as_given(header, seconds):
    assert parse_retry_after(header, now=NOW) == seconds


def test_an_http_date_is_read_against_the_callers_clock():
    assert parse_retry_after(http_date(NOW + timedelta(minutes=20)), now=NOW) == 20 * 60


def test_an_http_date_with_an_unknown_zone_is_gmt():
    # HTTP-dates are GMT by definition; "-0000" is the parser's way of not saying so.
    assert parse_retry_after("Wed, 02 Dec 2026 08:05:00 -0000", now=NOW) == 300


@pytest.mark.parametrize(
    "header",
    [http_date(NOW - timedelta(hours=2)), "-5"],
    ids=["past-date", "negative-seconds"],
)
def test_a_past_date_or_negative_delay_means_retry_now(header):
    assert parse_retry_after(header, now=NOW) == 0


@pytest.mark.parametrize(
    "header",
    [None, "", "   ", "soon", "nan", "inf", "-inf", "Wed, 32 Foo 2026 25:61:00 GMT", "12 s"],
)
def test_an_unusable_header_is_none_so_the_callers_default_applies(header):
    assert parse_retry_after(header, now=NOW) is None


@pytest.mark.parametrize(
    "header",
    ["1e12", "99999999999999999999", http_date(NOW + timedelta(days=365))],
    ids=["exponent", "many-digits", "next-year"],
)
def test_a_huge_delay_is_capped_at_a_day(header):
    assert MAX_RETRY_AFTER_SECONDS == 86_400
    assert parse_retry_after(header, now=NOW) == MAX_RETRY_AFTER_SECONDS
