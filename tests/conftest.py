"""Shared fixtures. The suite always connects as the application's own
non-superuser role (see tests/test_isolation.py::test_harness_is_not_vacuous)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import psycopg
import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.db import connection
from psycopg.conninfo import make_conninfo

from accounts.models import DeliverySettings
from tenancy.scope import tenant_scope
from tests.support.recording import RecordingChannel

User = get_user_model()

RECORDING_BACKENDS = {
    "console": "tests.support.recording.RecordingChannel",
    "telegram": "tests.support.recording.RecordingChannel",
    "whatsapp": "tests.support.recording.RecordingChannel",
}


# The test settings, for this process (below) and for the ``manage.py`` children
# the tests start (tests/support/processes.py). Telegram's one message a second
# per chat is spacing no test waits for except the one that guards it
# (tests/channels/test_pacing.py), which sets its own interval. The suite runs on the
# embedded database or on a CI server, both development: the console channel is
# allowed there, except in the tests of a real deployment, which turn it off.
TEST_SETTINGS = {"NUDGE_PER_CHAT_INTERVAL_SECONDS": 0.0, "ALLOW_CONSOLE_CHANNEL": True}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _test_settings(settings) -> None:
    for name, value in TEST_SETTINGS.items():
        setattr(settings, name, value)


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing() -> Iterator[None]:
    """Django's PBKDF2 with fewer iterations for the whole run, class- and
    module-scoped fixtures included (tests/support/hashers.py says why)."""
    from django.test import override_settings

    from tests.support.hashers import with_fast_pbkdf2

    with override_settings(PASSWORD_HASHERS=with_fast_pbkdf2(django_settings.PASSWORD_HASHERS)):
        yield


def new_user(
    username: str,
    *,
    channel: str = "console",
    timezone: str = "UTC",
    default_lead_minutes: int = 10,
    enabled: bool = True,
    **settings_fields,
) -> User:
    """A user with delivery settings (written inside the user's own scope)."""
    user = User.objects.create_user(username=username)
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(
            user=user,
            channel=channel,
            timezone=timezone,
            default_lead_minutes=default_lead_minutes,
            enabled=enabled,
            **settings_fields,
        )
    return user


@pytest.fixture
def make_user(db) -> Callable[..., User]:
    """Create a user with delivery settings (``new_user``), named ``userN`` by default."""
    counter = iter(range(1, 1_000_000))

    def make(username: str | None = None, **fields) -> User:
        return new_user(username or f"user{next(counter)}", **fields)

    return make


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache (the anonymous /healthz verdict lives there)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def recording_channel(settings):
    """Route every channel to the in-memory recording channel."""
    settings.NUDGE_CHANNEL_BACKENDS = RECORDING_BACKENDS
    RecordingChannel.reset()
    yield RecordingChannel
    RecordingChannel.reset()


def admin_url() -> str:
    """An admin connection to the server the tests use (a superuser)."""
    if os.environ.get("NUDGE_TEST_ADMIN_URL"):
        return os.environ["NUDGE_TEST_ADMIN_URL"]
    if django_settings.EMBEDDED_DATABASE:
        return f"postgresql://postgres:@/postgres?host={server_host()}"
    pytest.skip("set NUDGE_TEST_ADMIN_URL to run tests that need a superuser on this server")


def server_host() -> str:
    """The test database's host: as configured, or the embedded server's socket
    folder (which the backend fills in once the server runs)."""
    return connection.get_connection_params().get("host") or ""


def owner_conninfo() -> str:
    owner = django_settings.NUDGE_DB_OWNER
    params = {
        "dbname": connection.settings_dict["NAME"],  # the test database
        "user": owner["USER"],
        "password": owner["PASSWORD"] or None,
        "host": owner["HOST"] or server_host() or None,
        "port": owner["PORT"] or None,
    }
    return make_conninfo(**{key: value for key, value in params.items() if value})


@pytest.fixture
def as_owner(transactional_db) -> Iterator[Callable[[str, str], None]]:
    """Tamper with the schema the way only its owner can, committed, and undo it after.

    ``as_owner(statement, undo)``: the application's role cannot alter the
    schema, so tests that need a broken one change it through the owner's own
    connection. Committed DDL is visible to the test's connection, hence
    ``transactional_db``; a lock timeout turns a lock wait into a failure.
    """
    undo: list[str] = []
    with psycopg.connect(owner_conninfo(), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '5s'")

        def run(statement: str, reverse: str) -> None:
            conn.execute(statement)
            undo.append(reverse)

        yield run
        for statement in reversed(undo):
            conn.execute(statement)
