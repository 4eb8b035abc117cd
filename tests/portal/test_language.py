"""Issue 22, item 5: the user's language and clock — set from the browser at sign-up,
chosen in Settings, and used by Home, Settings, the navigation and the nudges."""

from __future__ import annotations

import zoneinfo
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import dateformat, timezone, translation

from accounts.models import DeliverySettings
from accounts.rules import preferences_for
from core.config import NudgeConfig
from followups import actions as followups
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope

from .conftest import PASSWORD

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


@pytest.mark.parametrize(
    ("header", "language", "clock"),
    [
        ("de-DE,de;q=0.9,en;q=0.8", "de", "24h"),
        ("en-US,en;q=0.9", "en", "12h"),
        ("en-GB,en;q=0.9", "en", "24h"),
        ("ja,es-MX;q=0.7", "es", "12h"),  # the first language we write in, and its clock
        ("pt-PT", "pt-br", "24h"),  # the Portuguese we have
        ("ja, zh;q=0.5", "en", "24h"),  # none of ours: the defaults
    ],
)
def test_accept_language_sets_language_and_clock_at_sign_up(person, header, language, clock):
    """The first visit after signing in makes the settings row from the browser's header."""
    user = person("ana")
    client = Client(headers={"accept-language": header})
    assert client.post(reverse("login"), {"username": "ana", "password": PASSWORD}).status_code
    page = client.get(reverse("portal:home"))
    assert page.status_code == 200
    saved = settings_of(user)
    assert (saved.language, saved.clock) == (language, clock)
    assert page["Content-Language"] == language


def test_the_browser_does_not_override_a_saved_choice(signed_in):
    """Only the first visit reads the header; afterwards the person's choice stands."""
    user, client = signed_in("ana")  # settings made already (English, 24 h)
    client.get(reverse("portal:home"), headers={"accept-language": "fr-FR"})
    assert settings_of(user).language == "en"


def test_preferences_ignore_a_wildcard_and_an_oversized_header():
    assert preferences_for("*") == {}
    assert preferences_for("de," + "x" * 5000) == {}  # unreadable: the defaults


def test_settings_choose_the_language_and_clock_and_the_pages_follow(signed_in):
    """Choosing German and 12 hours: Settings, Home and the nav are German, times 12-hour."""
    user, client = signed_in("ana")
    response = client.post(
        reverse("portal:settings"),
        {
            "channel": "console",
            "timezone": "Europe/Berlin",
            "default_lead_minutes": 10,
            "language": "de",
            "clock": "12h",
        },
        follow=True,
    )
    page = response.content.decode()
    assert "Einstellungen gespeichert." in page
    assert '<html lang="de">' in page
    assert "Einstellungen speichern" in page and "Abmelden" in page
    saved = settings_of(user)
    assert (saved.language, saved.clock) == ("de", "12h")

    now = timezone.now()
    due = (now + timedelta(hours=1)).replace(second=0, microsecond=0)
    followups.create_follow_up(user.pk, "Steuer", due, now, NudgeConfig.from_settings())
    home = client.get(reverse("portal:home")).content.decode()
    assert "Deine Erinnerungen" in home and "Demnächst" in home and "Wiedervorlagen" in home
    with translation.override("de"):
        twelve_hour = dateformat.format(due.astimezone(BERLIN), "g:i A")
    assert f'Steuer <span class="muted">(Wiedervorlage um {twelve_hour})' in home


def test_a_post_without_the_new_fields_keeps_them(signed_in):
    """An older page (or a script) that does not send language/clock changes neither."""
    user, client = signed_in("ana")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language="fr", clock="12h")
    client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "UTC", "default_lead_minutes": 10},
    )
    saved = settings_of(user)
    assert (saved.language, saved.clock) == ("fr", "12h")


def test_the_nudge_is_written_in_the_users_language_and_clock(signed_in, recording_channel):
    """Delivery reads the owner's language and clock with the subject (RESOLVE_NUDGE)."""
    user, _client = signed_in("ana")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            language="es", clock="12h", timezone="America/Mexico_City"
        )
    now = timezone.now().replace(second=0, microsecond=0)
    followups.create_follow_up(
        user.pk, "Llamar al banco", now + timedelta(minutes=30), now, NudgeConfig.from_settings()
    )
    run_deliver(now + timedelta(minutes=20))
    [message] = recording_channel.sent
    assert message.text.startswith("Recordatorio: Llamar al banco vence a las ")
    assert message.text.replace("\u202f", " ").endswith("m. (en 10 min)")
