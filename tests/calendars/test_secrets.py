"""Tokens and feed addresses at rest: encrypted, rotatable, never shown."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from calendars.snapshot import snapshot_of
from core.config import NudgeConfig
from providers import crypto
from tests.calendars.conftest import NOW, reload, run_sync
from tests.fakes.base import Answer


def test_round_trip_and_empty_stays_empty():
    assert crypto.decrypt(crypto.encrypt("ya29.secret")) == "ya29.secret"
    assert crypto.encrypt("") == "" and crypto.decrypt("") == ""


def test_keys_rotate_newest_first(settings):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CALENDAR_TOKEN_KEYS = [old]
    under_old = crypto.encrypt("token")

    settings.CALENDAR_TOKEN_KEYS = [new, old]
    assert crypto.decrypt(under_old) == "token"
    rotated = crypto.rotate_ciphertext(under_old)

    settings.CALENDAR_TOKEN_KEYS = [new]
    assert crypto.decrypt(rotated) == "token"
    with pytest.raises(crypto.SecretDecryptionError) as caught:
        crypto.decrypt(under_old)
    assert under_old not in str(caught.value)


def test_missing_key_is_a_clear_configuration_error(settings):
    settings.CALENDAR_TOKEN_KEYS = []
    settings.EMBEDDED_DATABASE = False
    with pytest.raises(ImproperlyConfigured, match="CALENDAR_TOKEN_KEYS"):
        crypto.encrypt("token")


def test_development_mode_derives_a_key_from_secret_key(settings):
    settings.CALENDAR_TOKEN_KEYS = []
    settings.EMBEDDED_DATABASE = True
    assert crypto.decrypt(crypto.encrypt("token")) == "token"


def test_a_bad_key_is_a_clear_configuration_error(settings):
    settings.CALENDAR_TOKEN_KEYS = ["not-a-fernet-key"]
    with pytest.raises(ImproperlyConfigured, match="not a Fernet key"):
        crypto.encrypt("token")


def test_scrub_removes_raw_and_url_encoded_secrets():
    secret = "https://calendar.example/private abc/basic.ics?x=1&y=2"
    text = f"failed: {secret} / {secret.replace(' ', '%20')} / https%3A%2F%2Fcalendar.example"
    assert "private" not in crypto.scrub(text, secret)


def test_nothing_secret_in_str_repr_or_snapshot(google_connection):
    connection = google_connection()
    access = crypto.decrypt(connection.access_token_encrypted)
    refresh = crypto.decrypt(connection.refresh_token_encrypted)
    from tenancy.scope import tenant_scope

    with tenant_scope(connection.user_id):
        snapshot = snapshot_of(connection, NudgeConfig.from_settings())
    shown = f"{connection} {connection!r} {snapshot!r}"
    assert access not in shown and refresh not in shown
    assert access not in connection.access_token_encrypted


def test_a_key_that_no_longer_decrypts_fails_that_connection_only(
    settings, google_connection, ics_connection, fake_ics
):
    from tests.calendars.ics_samples import SINGLE

    fake_ics.body = SINGLE
    broken = google_connection()
    user = broken.user
    ics_connection(user)
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
    # Re-encrypt the feed under the new key; the Google tokens stay under the lost one.
    from calendars.models import CalendarConnection
    from tenancy.scope import tenant_scope

    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(provider="ics").update(
            feed_url_encrypted=crypto.encrypt(fake_ics.feed_url)
        )

    summary = run_sync(user.pk)

    assert (summary.synced, summary.failed) == (1, 1)
    assert "cannot be decrypted" in reload(broken).last_error


def test_provider_error_text_is_scrubbed_before_storing(google_connection, fake_google, caplog):
    connection = google_connection(token_expires_at=NOW - timedelta(hours=1))
    refresh = crypto.decrypt(connection.refresh_token_encrypted)
    # A token endpoint that echoes the refresh token in its error code.
    fake_google.next_token_answers = [Answer.json(400, {"error": f"bad_{refresh}"})]

    with caplog.at_level(logging.DEBUG):
        run_sync(connection.user_id)

    stored = reload(connection)
    assert stored.last_error and refresh not in stored.last_error
    assert refresh not in caplog.text
