"""manage.py connect_ics and sync_calendars: thin commands over calendars.connect / .sync."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from calendars.models import CalendarConnection, CalendarEvent
from providers import crypto
from tenancy.scope import tenant_scope
from tests.calendars.ics_samples import FEED, SINGLE
from tests.fakes.base import Answer


def connections_of(user_id: int) -> list[CalendarConnection]:
    with tenant_scope(user_id):
        return list(CalendarConnection.objects.filter(user_id=user_id))


def test_connect_ics_validates_fetches_once_and_stores_encrypted(make_user, fake_ics):
    fake_ics.body = FEED
    user = make_user()
    out = StringIO()

    call_command("connect_ics", str(user.pk), fake_ics.feed_url, "--allow-private", stdout=out)

    [connection] = connections_of(user.pk)
    assert connection.account == "someone@example.com"  # X-WR-CALNAME
    assert crypto.decrypt(connection.feed_url_encrypted) == fake_ics.feed_url
    assert fake_ics.secret not in connection.feed_url_encrypted
    assert fake_ics.secret not in out.getvalue()
    assert len(fake_ics.feed_calls()) == 1
    with tenant_scope(user.pk):
        assert CalendarEvent.objects.filter(connection=connection).count() > 0


def test_connect_ics_refuses_private_hosts_without_the_flag(make_user, fake_ics):
    fake_ics.body = SINGLE
    user = make_user()

    with pytest.raises(CommandError, match="private or local address") as caught:
        call_command("connect_ics", str(user.pk), fake_ics.feed_url)

    assert fake_ics.secret not in str(caught.value)
    assert connections_of(user.pk) == [] and fake_ics.feed_calls() == []


def test_connect_ics_names_the_flag_for_a_local_feed(make_user, fake_ics):
    """issue 33: a local test feed needed ``--allow-private``, named only in an OPERATIONS
    table: the refusal says how to allow it."""
    fake_ics.body = SINGLE
    with pytest.raises(CommandError, match="add --allow-private"):
        call_command("connect_ics", str(make_user().pk), fake_ics.feed_url)


def test_connect_ics_accepts_webcal_as_the_user_area_does(make_user, fake_ics):
    """issue 33: ``connect_ics`` refused ``webcal://`` although the user area accepts it.
    It is read as https, as the user area reads it (one rule: providers.ics)."""
    user = make_user()
    webcal = fake_ics.feed_url.replace("http://", "webcal://", 1)
    with pytest.raises(CommandError) as caught:
        call_command("connect_ics", str(user.pk), webcal, "--allow-private")
    # Read as https: the fake speaks plain http, so the TLS handshake is what fails,
    # not the scheme check.
    assert "must be an http:// or https:// URL" not in str(caught.value)
    assert fake_ics.secret not in str(caught.value)


def test_connect_ics_tells_an_unresolvable_host_from_a_private_one(make_user):
    """issue 33: an unresolvable host got the same refusal as a private one."""
    user = make_user()
    with pytest.raises(CommandError, match=r"cannot resolve calendar\.invalid"):
        call_command("connect_ics", str(user.pk), "https://calendar.invalid/x.ics")
    with pytest.raises(CommandError, match="private or local address"):
        call_command("connect_ics", str(user.pk), "https://10.1.2.3/x.ics")


@pytest.mark.parametrize("url", ["ftp://example.com/x.ics", "not a url"])
def test_connect_ics_refuses_other_schemes(make_user, url):
    user = make_user()
    with pytest.raises(CommandError, match="http"):
        call_command("connect_ics", str(user.pk), url)


def test_connect_ics_refuses_a_feed_that_does_not_parse(make_user, fake_ics):
    fake_ics.body = b"<html>sign in</html>"
    user = make_user()
    with pytest.raises(CommandError, match="not an iCalendar feed"):
        call_command("connect_ics", str(user.pk), fake_ics.feed_url, "--allow-private")
    assert connections_of(user.pk) == []


def test_connect_ics_needs_an_existing_user(db, fake_ics):
    with pytest.raises(CommandError, match="no user"):
        call_command("connect_ics", "999999", fake_ics.feed_url, "--allow-private")


def test_sync_calendars_prints_a_line_per_connection_and_a_summary(
    make_user, fake_ics, ics_connection
):
    fake_ics.body = SINGLE
    user = make_user()
    ics_connection(user)
    ics_connection(user)
    out = StringIO()

    call_command("sync_calendars", "--user", str(user.pk), "--now", "2026-12-02T08:00Z", stdout=out)

    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 3
    assert all(f"user {user.pk} connection" in line and "synced" in line for line in lines[:2])
    assert lines[2].startswith("2 connections: 2 synced")


def test_sync_calendars_exits_non_zero_when_a_connection_fails(make_user, fake_ics, ics_connection):
    fake_ics.body = SINGLE
    user = make_user()
    ics_connection(user)
    fake_ics.next_answers = [Answer(500, b"boom")]
    out = StringIO()

    with pytest.raises(CommandError, match="1 connection"):
        call_command("sync_calendars", "--user", str(user.pk), stdout=out)

    assert "(ics): failed, 1 calls — ics: HTTP 500" in out.getvalue()
    assert fake_ics.secret not in out.getvalue()
