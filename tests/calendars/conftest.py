"""Fixtures for the calendar tests: fake providers on 127.0.0.1 and connections.

Every fake is a real HTTP server; the code under test uses its real HTTP client.
Connections are created inside the owner's tenant scope, as production does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography.fernet import Fernet

from calendars.models import CalendarConnection, CalendarEvent
from calendars.sync import SyncSummary
from calendars.sync_pool import sync_user_connections
from core.config import NudgeConfig
from providers import crypto
from providers.base import ConnectionSnapshot
from tenancy.scope import tenant_scope
from tests.calendars.push_support import serve_app
from tests.fakes import google_server, microsoft_server
from tests.fakes.fixtures import fake_telegram, telegram_settings  # noqa: F401 — fixtures
from tests.fakes.google_server import FakeGoogle
from tests.fakes.ics_server import FakeIcsFeed
from tests.fakes.microsoft_server import FakeGraph

NOW = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
TEST_KEY = Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def calendar_settings(settings):
    settings.CALENDAR_TOKEN_KEYS = [TEST_KEY]
    settings.CALENDAR_HTTP_TIMEOUT_SECONDS = 5.0
    yield settings


@pytest.fixture
def unpaced_providers(settings):
    """The shared request budgets off, for a test that replays later runs on a
    simulated clock: a 429's pause is on the real clock and would hold them up."""
    settings.CALENDAR_GOOGLE_PROJECT_RATE_PER_MINUTE = 0
    settings.CALENDAR_GOOGLE_USER_RATE_PER_MINUTE = 0
    settings.CALENDAR_GRAPH_APP_RATE_PER_MINUTE = 0
    settings.CALENDAR_GRAPH_MAILBOX_RATE_PER_MINUTE = 0
    return settings


@pytest.fixture
def fake_google(settings) -> Iterator[FakeGoogle]:
    with FakeGoogle() as server:
        settings.GOOGLE_CLIENT_ID = google_server.CLIENT_ID
        settings.GOOGLE_CLIENT_SECRET = google_server.CLIENT_SECRET
        settings.GOOGLE_AUTH_URL = server.auth_url
        settings.GOOGLE_TOKEN_URL = server.token_url
        settings.GOOGLE_API_BASE_URL = server.api_base_url
        yield server


@pytest.fixture
def fake_graph(settings) -> Iterator[FakeGraph]:
    with FakeGraph() as server:
        settings.MICROSOFT_CLIENT_ID = microsoft_server.CLIENT_ID
        settings.MICROSOFT_CLIENT_SECRET = microsoft_server.CLIENT_SECRET
        settings.MICROSOFT_TENANT = microsoft_server.TENANT
        settings.MICROSOFT_LOGIN_BASE_URL = server.login_base_url
        settings.MICROSOFT_GRAPH_BASE_URL = server.graph_base_url
        yield server


@pytest.fixture
def fake_ics() -> Iterator[FakeIcsFeed]:
    with FakeIcsFeed() as server:
        yield server


def make_connection(user, provider: str, **fields: Any) -> CalendarConnection:
    """A connection row, secrets encrypted, written inside the owner's scope."""
    secrets = {
        "access_token_encrypted": fields.pop("access_token", ""),
        "refresh_token_encrypted": fields.pop("refresh_token", ""),
        "feed_url_encrypted": fields.pop("feed_url", ""),
    }
    with tenant_scope(user.pk):
        return CalendarConnection.objects.create(
            user=user,
            provider=provider,
            **{name: crypto.encrypt(value) for name, value in secrets.items()},
            **fields,
        )


@pytest.fixture
def google_connection(make_user, fake_google) -> Callable[..., CalendarConnection]:
    def make(user=None, **fields: Any) -> CalendarConnection:
        access, refresh = fake_google.issue_tokens()
        return make_connection(
            user or make_user(),
            "google",
            account=google_server.ACCOUNT,
            access_token=access,
            refresh_token=refresh,
            **{"token_expires_at": NOW + timedelta(hours=1), **fields},
        )

    return make


@pytest.fixture
def graph_connection(make_user, fake_graph) -> Callable[..., CalendarConnection]:
    def make(user=None, **fields: Any) -> CalendarConnection:
        access, refresh = fake_graph.issue_tokens()
        return make_connection(
            user or make_user(),
            "microsoft",
            account=microsoft_server.ACCOUNT,
            access_token=access,
            refresh_token=refresh,
            **{"token_expires_at": NOW + timedelta(hours=1), **fields},
        )

    return make


@pytest.fixture
def ics_connection(make_user, fake_ics) -> Callable[..., CalendarConnection]:
    def make(user=None, **fields: Any) -> CalendarConnection:
        return make_connection(
            user or make_user(),
            "ics",
            account=fields.pop("account", "feed"),
            calendar_id="",
            feed_url=fake_ics.feed_url,
            **{"allow_private_network": True, **fields},
        )

    return make


def provider_snapshot(provider: str, config: NudgeConfig, **fields: Any) -> ConnectionSnapshot:
    """A connection as a sync hands it to its provider (connection and user 1 unless given)."""
    defaults = {"connection_id": 1, "user_id": 1, "calendar_id": "", "account": ""}
    return ConnectionSnapshot(
        provider=provider,
        sync_state={},
        full_sync=True,
        config=config,
        **{**defaults, **fields},
    )


def run_sync(user_id: int, now: datetime = NOW) -> SyncSummary:
    return sync_user_connections(user_id, now=now, config=NudgeConfig.from_settings())


def events_of(connection: CalendarConnection) -> list[CalendarEvent]:
    with tenant_scope(connection.user_id):
        return list(
            CalendarEvent.objects.filter(connection_id=connection.pk).order_by(
                "starts_at", "provider_event_id"
            )
        )


def reload(connection: CalendarConnection) -> CalendarConnection:
    with tenant_scope(connection.user_id):
        return CalendarConnection.objects.get(pk=connection.pk)


@pytest.fixture
def app_url(transactional_db, settings):
    """The app served on 127.0.0.1 for the fakes' notifications (see ``push_support``)."""
    settings.SECURE_SSL_REDIRECT = False
    with serve_app() as url:
        yield url


@pytest.fixture
def push_settings(settings, app_url):
    settings.CALENDAR_PUSH_BASE_URL = app_url
    return settings
