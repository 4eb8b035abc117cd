"""The paging and refresh-once loop Google and Microsoft Graph share, through both providers.

Each test runs once against the fake Google and once against the fake Graph,
with the real provider code and its real HTTP client.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType
from urllib.parse import urlsplit

import pytest

from calendars.models import CalendarConnection
from providers import google as google_provider
from providers import microsoft as graph_provider
from providers.oauth import MAX_PAGES
from tests.calendars.conftest import NOW, events_of, reload, run_sync
from tests.fakes.base import Answer, RecordedRequest
from tests.fakes.google_server import FakeGoogle, google_event
from tests.fakes.microsoft_server import FakeGraph, graph_event

T9 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
UNAUTHORISED = Answer.json(401, {"error": {"code": 401, "message": "Invalid Credentials"}})


@dataclass
class OAuthCalendar:
    """One OAuth provider's fake, connection factory and module, behind one face."""

    name: str
    fake: FakeGoogle | FakeGraph
    connect: Callable[..., CalendarConnection]
    module: ModuleType

    def set_hourly_events(self, count: int) -> None:
        """``count`` one-hour events from 09:00, all inside the sync window."""
        times = [(T9 + i * HOUR, T9 + (i + 1) * HOUR) for i in range(count)]
        if isinstance(self.fake, FakeGoogle):
            self.fake.events["primary"] = [google_event(f"e{i}", *t) for i, t in enumerate(times)]
        else:
            self.fake.events = [graph_event(f"e{i}", *t) for i, t in enumerate(times)]

    def list_calls(self) -> list[RecordedRequest]:
        if isinstance(self.fake, FakeGoogle):
            return self.fake.events_calls()
        return self.fake.view_calls()

    def expire_access_tokens(self) -> None:
        """The provider stops honouring every access token it issued; refresh tokens stay good."""
        with self.fake.lock:
            self.fake.access_tokens.clear()

    def expire_access_tokens_before_list_call(self, number: int) -> None:
        """As :meth:`expire_access_tokens`, just before the ``number``-th list call is answered."""
        original = self.fake.answer
        list_calls = itertools.count(1)

        def answer(method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
            is_list_call = urlsplit(path).path.endswith(("/events", "/calendarView"))
            if is_list_call and next(list_calls) == number:
                self.expire_access_tokens()
            return original(method, path, headers, body)

        self.fake.answer = answer


PROVIDERS = {
    "google": ("fake_google", "google_connection", google_provider),
    "microsoft": ("fake_graph", "graph_connection", graph_provider),
}


@pytest.fixture(params=sorted(PROVIDERS))
def oauth_calendar(request, monkeypatch, db) -> OAuthCalendar:
    # ``db`` is named here: the test database must exist before the fixtures below,
    # looked up by name, create their users.
    fake, connect, module = PROVIDERS[request.param]
    calendar = OAuthCalendar(
        request.param, request.getfixturevalue(fake), request.getfixturevalue(connect), module
    )
    monkeypatch.setattr(module, "PAGE_SIZE", 1)  # one event per page
    return calendar


def test_a_token_refused_again_after_its_refresh_needs_reauth_after_one_refresh(oauth_calendar):
    oauth_calendar.set_hourly_events(1)
    connection = oauth_calendar.connect()
    run_sync(connection.user_id)
    oauth_calendar.fake.next_answers = [UNAUTHORISED] * 3

    summary = run_sync(connection.user_id, NOW + timedelta(minutes=15))

    assert summary.needs_reauth == 1
    stored = reload(connection)
    assert stored.status == "needs_reauth"
    assert stored.last_error == (
        f"{oauth_calendar.name}: access token refused after a refresh; reconnect needed"
    )
    assert len(oauth_calendar.fake.token_calls()) == 1
    assert len(oauth_calendar.list_calls()) == 1 + 2  # the first sync, then 401, refresh, 401
    assert [e.provider_event_id for e in events_of(connection)] == ["e0"]  # the copy stays


def test_a_401_on_a_later_page_is_not_refreshed_a_second_time(oauth_calendar):
    oauth_calendar.set_hourly_events(3)
    connection = oauth_calendar.connect()
    oauth_calendar.expire_access_tokens()  # page 1: 401, refresh, page 1 again
    oauth_calendar.expire_access_tokens_before_list_call(3)  # page 2: 401 once more

    summary = run_sync(connection.user_id)

    assert summary.needs_reauth == 1
    assert reload(connection).status == "needs_reauth"
    assert len(oauth_calendar.fake.token_calls()) == 1
    assert len(oauth_calendar.list_calls()) == 3
    assert events_of(connection) == []


def test_the_page_limit_is_the_same_for_both_providers(oauth_calendar):
    oauth_calendar.set_hourly_events(MAX_PAGES)
    full = oauth_calendar.connect()
    assert run_sync(full.user_id).synced == 1
    assert len(events_of(full)) == MAX_PAGES == len(oauth_calendar.list_calls())

    oauth_calendar.set_hourly_events(MAX_PAGES + 1)
    too_many = oauth_calendar.connect()
    summary = run_sync(too_many.user_id)

    assert summary.failed == 1
    assert reload(too_many).last_error == (
        f"{oauth_calendar.name}: more than {MAX_PAGES} pages for one window"
    )
    assert events_of(too_many) == []
    assert len(oauth_calendar.list_calls()) == 2 * MAX_PAGES  # the page past the limit not asked


def test_the_retry_after_a_401_does_not_use_up_a_page(oauth_calendar):
    oauth_calendar.set_hourly_events(MAX_PAGES)
    connection = oauth_calendar.connect()  # our clock says the token is good for an hour
    oauth_calendar.expire_access_tokens()  # the provider disagrees

    summary = run_sync(connection.user_id)

    assert summary.synced == 1
    assert len(events_of(connection)) == MAX_PAGES
    assert len(oauth_calendar.fake.token_calls()) == 1
    assert len(oauth_calendar.list_calls()) == MAX_PAGES + 1
