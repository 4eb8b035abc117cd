"""Connecting iCloud (or any CalDAV server) on the Calendars page: the preset and where to
make an app-specific password, the password never shown again, the calendars to choose,
"needs your password again", in the person's language. The page calls no server."""

from __future__ import annotations

import socket

import pytest
from cryptography.fernet import Fernet
from django.urls import reverse

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, ConnectionStatus, Provider
from providers import crypto
from tenancy.scope import tenant_scope

APP_PASSWORD = "wxyz-abcd-efgh-ijkl"
_real_getaddrinfo = socket.getaddrinfo


@pytest.fixture(autouse=True)
def token_key(settings):
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]


@pytest.fixture
def icloud_resolves(monkeypatch):
    """iCloud's CalDAV host resolves to a public address (the test has no DNS); nothing
    connects to it: the page records the account and the minute job discovers."""

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "caldav.icloud.com":
            return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("17.1.2.3", 443))]
        return _real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def connections_of(user) -> list[CalendarConnection]:
    with tenant_scope(user.pk):
        return list(CalendarConnection.objects.filter(user_id=user.pk, provider=Provider.CALDAV))


def test_connect_icloud_says_where_to_make_an_app_password(signed_in):
    _user, client = signed_in("ana")

    page = client.get(reverse("portal:calendars") + "?caldav=icloud").content.decode()

    assert "Connect iCloud" in page
    assert "Apple ID → Sign-In and Security → App-Specific Passwords" in page
    assert 'id="id_server_url"' not in page  # the preset knows iCloud's server
    assert 'type="password"' in page


def test_connecting_icloud_records_the_account_and_never_shows_the_password(
    signed_in, icloud_resolves
):
    user, client = signed_in("ana")

    response = client.post(
        reverse("portal:calendar_add_caldav"),
        {"preset": "icloud", "username": "ana@icloud.com", "password": APP_PASSWORD},
        follow=True,
    )

    page = response.content.decode()
    assert "Account added: finding its calendars now." in page
    assert APP_PASSWORD not in page
    [account] = connections_of(user)
    assert account.calendar_id == "" and account.account == "ana@icloud.com"
    assert crypto.decrypt(account.access_token_encrypted) == APP_PASSWORD
    assert APP_PASSWORD not in account.access_token_encrypted
    assert crypto.decrypt(account.feed_url_encrypted) == "https://caldav.icloud.com/"


def test_a_server_on_a_private_address_is_refused_in_plain_words(signed_in):
    user, client = signed_in("ana")

    response = client.post(
        reverse("portal:calendar_add_caldav"),
        {
            "preset": "other",
            "server_url": "http://127.0.0.1:5232/",
            "username": "ana",
            "password": APP_PASSWORD,
        },
    )

    page = response.content.decode()
    assert "This server address cannot be used." in page
    assert APP_PASSWORD not in page
    assert connections_of(user) == []


def test_a_server_in_clear_http_is_refused_before_any_password_is_sent(signed_in):
    user, client = signed_in("ana")

    response = client.post(
        reverse("portal:calendar_add_caldav"),
        {
            "preset": "other",
            "server_url": "http://dav.example.com/",
            "username": "ana",
            "password": APP_PASSWORD,
        },
    )

    assert "This server address cannot be used." in response.content.decode()
    assert connections_of(user) == []


def discovered_account(user) -> CalendarConnection:
    with tenant_scope(user.pk):
        return CalendarConnection.objects.create(
            user=user,
            provider=Provider.CALDAV,
            account="ana@icloud.com",
            calendar_id="",
            access_token_encrypted=crypto.encrypt(APP_PASSWORD),
            feed_url_encrypted=crypto.encrypt("https://caldav.icloud.com/"),
            last_synced_at="2026-12-02T08:00:00Z",
            sync_state={
                "calendars": [
                    {"url": "https://p01-caldav.icloud.com/1/calendars/work/", "name": "Work"},
                    {"url": "https://p01-caldav.icloud.com/1/calendars/home/", "name": "Home"},
                ]
            },
        )


def test_the_person_chooses_which_discovered_calendars_to_use(signed_in):
    user, client = signed_in("ana")
    account = discovered_account(user)

    page = client.get(reverse("portal:calendars")).content.decode()
    assert "Choose the calendars to be nudged for:" in page and "Home" in page
    response = client.post(
        reverse("portal:calendar_caldav_choose", args=[account.pk]),
        {"calendar": ["https://p01-caldav.icloud.com/1/calendars/home/"]},
        follow=True,
    )

    assert "Calendars chosen: checking them now." in response.content.decode()
    [chosen] = connections_of(user)
    assert chosen.pk == account.pk and chosen.calendar_id == "/1/calendars/home/"
    assert chosen.sync_state == {"name": "Home"}


def test_a_refused_password_is_asked_for_again_in_german(signed_in):
    user, client = signed_in("greta")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language="de")
    account = discovered_account(user)
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(pk=account.pk).update(
            calendar_id="/1/calendars/work/", status=ConnectionStatus.NEEDS_REAUTH, sync_state={}
        )

    page = client.get(reverse("portal:calendars")).content.decode()
    assert "Braucht dein Passwort erneut" in page
    assert "Neues app-spezifisches Passwort" in page
    response = client.post(
        reverse("portal:calendar_caldav_password", args=[account.pk]),
        {"password": "new-app-password"},
        follow=True,
    )

    assert "Passwort gespeichert" in response.content.decode()
    [renewed] = connections_of(user)
    assert renewed.status == ConnectionStatus.ACTIVE and renewed.resync_requested
    assert crypto.decrypt(renewed.access_token_encrypted) == "new-app-password"


@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("de", "iCloud verbinden"),
        ("es", "Conectar iCloud"),
        ("fr", "Connecter iCloud"),
        ("pt-br", "Conectar iCloud"),
    ],
)
def test_connect_icloud_in_every_language(signed_in, language, words):
    user, client = signed_in("lu")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language=language)

    page = client.get(reverse("portal:calendars") + "?caldav=icloud").content.decode()

    assert words in page and "Connect iCloud" not in page
    assert "App-Specific Passwords" not in page  # the help sentence is translated too
