"""Issue 22, item 5: the user area, its sentences and the Telegram buttons in the
person's language (English, German, Spanish, French, Brazilian Portuguese)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from accounts.actions import PAUSED_BY_STOP
from accounts.models import Channel, DeliverySettings
from calendars.connect import REFUSED
from calendars.models import CalendarConnection, Provider
from core.config import NudgeConfig
from followups import actions as followups
from messaging.messages import Shape, clock_text, compose
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope

from .test_nudge_actions import CHAT, answers, buttons, linked, pending_rows, poll, sent_nudge

CATALOGS = sorted(Path(settings.BASE_DIR, "locale").glob("*/LC_MESSAGES/django.po"))


def _entries(text: str) -> list[tuple[str, str, list[str]]]:
    """(msgid, every msgstr joined, flags) of each entry of a .po file but its header."""
    found = []
    for block in text.split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith("#~")]
        flags = [f.strip() for line in lines if line.startswith("#,") for f in line[2:].split(",")]
        msgid, strings, current = "", [], None
        for line in lines:
            if line.startswith("msgid "):
                current, msgid = "id", line[6:].strip('"')
            elif line.startswith("msgid_plural"):
                current = "plural"
            elif line.startswith("msgstr"):
                current = "str"
                strings.append(line.split(" ", 1)[1].strip('"'))
            elif line.startswith('"') and current == "id":
                msgid += line.strip('"')
            elif line.startswith('"') and current == "str":
                strings[-1] += line.strip('"')
        if current is not None and msgid:
            found.append((msgid, strings, flags))
    return found


def test_the_four_catalogs_exist():
    """Item 5: German, Spanish, French and Brazilian Portuguese catalogs, each compiled."""
    assert [path.parts[-3] for path in CATALOGS] == ["de", "es", "fr", "pt_BR"]
    for path in CATALOGS:
        assert path.with_suffix(".mo").is_file()


@pytest.mark.parametrize("path", CATALOGS, ids=lambda path: path.parts[-3])
def test_every_entry_is_translated_and_none_is_fuzzy(path):
    """Item 5: no word of the user area falls back to English in any catalog."""
    entries = _entries(path.read_text("utf-8"))
    assert len(entries) > 100
    untranslated = [msgid for msgid, strings, _ in entries if not all(strings)]
    fuzzy = [msgid for msgid, _, flags in entries if "fuzzy" in flags]
    assert untranslated == []
    assert fuzzy == []
    # Placeholders survive translation.
    for msgid, strings, _ in entries:
        wanted = sorted(re.findall(r"%\(\w+\)s|\{\w+\}", msgid))
        for translated in strings:
            assert sorted(re.findall(r"%\(\w+\)s|\{\w+\}", translated)) == wanted, msgid


@pytest.fixture
def german(signed_in):
    user, client = signed_in("greta")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language="de")
    return user, client


def test_follow_ups_calendars_and_account_are_german_for_a_german_user(german):
    """Item 5: every page of the user area follows the person's language."""
    user, client = german
    now = timezone.now()
    followups.create_follow_up(
        user.pk, "Steuer", now + timedelta(days=1), now, NudgeConfig.from_settings()
    )
    with tenant_scope(user.pk):
        CalendarConnection.objects.create(
            user_id=user.pk, provider=Provider.ICS, account="Team", skip_all_day=True
        )

    page = client.get(reverse("portal:follow_ups")).content.decode()
    assert '<html lang="de">' in page
    for words in ("Alle Wiedervorlagen", "Wiederholung und Erinnerungen", "Zur Zeit selbst"):
        assert words in page
    assert "Morgen 9:00" in page and "Bearbeiten" in page and "Erledigt" in page
    assert "All follow-ups" not in page and "At the time" not in page
    assert "Bis zu 200 Zeichen." in page and "Up to 200 characters." not in page

    page = client.get(reverse("portal:calendars")).content.decode()
    for words in ("Verbunden", "Ganztägige Termine auslassen", "Kalenderadresse hinzufügen"):
        assert words in page
    assert "Connected" not in page and "Skip all-day events" not in page

    page = client.get(reverse("portal:account")).content.decode()
    for words in ("Konto", "Passwort ändern", "E-Mail-Adresse", "Angemeldet als greta."):
        assert words in page
    assert "Change password" not in page

    # A confirm page and a message after an act are German too.
    response = client.post(
        reverse("portal:follow_ups"), {"title": "Anruf", "quick": "in_1h"}, follow=True
    )
    assert "„Anruf“ hinzugefügt, fällig" in response.content.decode()


def test_why_nudges_are_held_is_said_in_the_persons_language(german):
    """A pause's and an unreachable channel's reasons are stored in English for support;
    the person reads them in their own language."""
    user, client = german
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            channel=Channel.TELEGRAM,
            telegram_chat_id="4242",
            paused=True,
            paused_at=timezone.now(),
            paused_reason=PAUSED_BY_STOP[Channel.TELEGRAM],
        )
    said = "du hast dem Bot in Telegram /stop geschickt"
    assert (
        f"Erinnerungen sind pausiert: {said}."
        in client.get(reverse("portal:home")).content.decode()
    )
    assert f": {said}." in client.get(reverse("portal:settings")).content.decode()

    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            paused=False,
            paused_reason="",
            unreachable_channel=Channel.TELEGRAM,
            unreachable_reason="you blocked the bot in Telegram",
        )
    home = client.get(reverse("portal:home")).content.decode()
    settings_page = client.get(reverse("portal:settings")).content.decode()
    for page in (home, settings_page):
        assert "du hast den Bot in Telegram blockiert" in page
        assert "you blocked the bot" not in page


@pytest.fixture
def elena(make_user, tg):
    return linked(make_user, Channel.TELEGRAM, str(CHAT), language="es")


@pytest.fixture
def tg(bot, fake_telegram):
    return fake_telegram


def test_telegram_buttons_and_a_taps_answer_are_spanish_for_a_spanish_user(tg, elena):
    """Item 5 (with items 2-4): the buttons and what a tap answers, in the owner's language."""
    now = timezone.now().replace(microsecond=0)
    _row, message_id = sent_nudge(tg, elena, "Llamar a Bea", due_in=timedelta(minutes=30), now=now)
    keys = buttons(tg, message_id)
    assert list(keys) == ["Posponer 10 min", "Hecho"]

    tg.push_tap(CHAT, message_id, keys["Posponer 10 min"]["callback_data"])
    poll(now)
    [said] = answers(tg)
    [snoozed] = pending_rows(elena)
    until = clock_text(DeliverySettings(language="es"), snoozed.intended_at, now)
    assert said == f"Pospuesto hasta las {until}"
    assert tg.text_of(CHAT, message_id).endswith(said)


def test_a_snoozed_nudge_reads_as_snoozed(tg, elena):
    """Item 3 with item 5: the nudge a Snooze queued opens with the snoozed words, in
    the owner's language, not as a plain reminder."""
    now = timezone.now().replace(microsecond=0)
    _row, message_id = sent_nudge(tg, elena, "Llamar a Bea", due_in=timedelta(minutes=30), now=now)
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Posponer 10 min"]["callback_data"])
    poll(now)
    [snoozed] = pending_rows(elena)

    assert run_deliver(snoozed.intended_at).sent == 1
    text = tg.delivered[-1].text
    starts_at = snoozed.subject_starts_at
    as_snoozed = compose(
        kind="follow_up",
        title="Llamar a Bea",
        starts_at=starts_at,
        now=snoozed.intended_at,
        tz_name="UTC",
        valid_until=starts_at,
        language="es",
        shape=Shape.SNOOZED,
    ).text
    as_reminder = compose(
        kind="follow_up",
        title="Llamar a Bea",
        starts_at=starts_at,
        now=snoozed.intended_at,
        tz_name="UTC",
        valid_until=starts_at,
        language="es",
        shape=Shape.REMINDER,
    ).text
    assert as_snoozed != as_reminder
    assert text.splitlines()[0] == as_snoozed.splitlines()[0]


@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("de", ("Aktiv", "ICS-Kalender", "Diese Adresse kann nicht verwendet werden.")),
        ("es", ("Activo", "Calendario ICS", "Esta dirección no se puede usar.")),
    ],
)
def test_calendars_page_status_type_and_refusal_are_translated(signed_in, language, words):
    """issue 33: German and Spanish Calendars pages still showed English for a
    connection's status ("Active"), its type ("ICS feed") and the refusal sentence."""
    user, client = signed_in(f"cal_{language}")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language=language)
        CalendarConnection.objects.create(
            user_id=user.pk, provider=Provider.ICS, account="Team", last_synced_at=timezone.now()
        )

    shown = client.get(reverse("portal:calendars")).content.decode()
    refused = client.post(
        reverse("portal:calendar_add_ics"), {"url": "http://127.0.0.1:8080/cal.ics"}
    ).content.decode()

    for page in (shown, refused):
        assert words[0] in page and words[1] in page
        for english in ("Active", "ICS feed", escape(REFUSED), REFUSED[:28]):
            assert english not in page
    assert words[2] in refused
