"""manage.py rotate_calendar_keys: after it, the old key can be removed."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command

from calendars.management.commands.rotate_calendar_keys import SECRET_COLUMNS
from calendars.models import CalendarConnection, Provider
from providers import crypto
from tenancy.scope import tenant_scope


def _connection(user, **secrets: str) -> CalendarConnection:
    with tenant_scope(user.pk):
        return CalendarConnection.objects.create(
            user=user,
            provider=Provider.GOOGLE if "refresh" in secrets else Provider.ICS,
            access_token_encrypted=crypto.encrypt(secrets.get("access", "")),
            refresh_token_encrypted=crypto.encrypt(secrets.get("refresh", "")),
            feed_url_encrypted=crypto.encrypt(secrets.get("feed", "")),
        )


def _plain(user, pk: int) -> dict[str, str]:
    with tenant_scope(user.pk):
        row = CalendarConnection.objects.get(pk=pk)
        return {column: crypto.decrypt(getattr(row, column)) for column in SECRET_COLUMNS}


def test_every_secret_column_of_every_tenant_is_readable_with_only_the_new_key(
    make_user, settings, capsys
):
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.CALENDAR_TOKEN_KEYS = [old]
    alice, bob = make_user("alice"), make_user("bob")
    google = _connection(alice, access="ya29.a", refresh="1//r")
    feed = _connection(bob, feed="https://calendar.example/private-abc/basic.ics")

    settings.CALENDAR_TOKEN_KEYS = [new, old]
    call_command("rotate_calendar_keys")
    assert capsys.readouterr().out.strip() == (
        "rotate_calendar_keys: connections 2, secrets re-encrypted 3"
    )

    settings.CALENDAR_TOKEN_KEYS = [new]  # the old key is retired
    assert _plain(alice, google.pk) == {
        "access_token_encrypted": "ya29.a",
        "refresh_token_encrypted": "1//r",
        "feed_url_encrypted": "",
    }
    assert _plain(bob, feed.pk)["feed_url_encrypted"] == (
        "https://calendar.example/private-abc/basic.ics"
    )


def test_a_secret_no_key_can_read_is_reported_and_left_alone(make_user, settings, capsys):
    lost, kept = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    user = make_user()
    settings.CALENDAR_TOKEN_KEYS = [lost]
    unreadable = _connection(user, feed="https://calendar.example/a.ics")
    settings.CALENDAR_TOKEN_KEYS = [kept]
    readable = _connection(user, feed="https://calendar.example/b.ics")

    with pytest.raises(CommandError, match="keep the old keys"):
        call_command("rotate_calendar_keys")
    out = capsys.readouterr().out
    assert f"unreadable with every configured key: connections {unreadable.pk}" in out
    assert _plain(user, readable.pk)["feed_url_encrypted"] == "https://calendar.example/b.ics"
