# ruff: noqa: F811 — the fixtures imported from test_nudge_actions are used as arguments
"""Issue 36: a follow-up captured in the chat, undone or moved; /next and /today; the
command menu. End to end through the real clients against the fake providers: an
update served by the fake Bot API's getUpdates or posted to the webhook, a signed
inbound form from the fake Twilio, and the nudge delivered by the real sweep."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command

from accounts.models import Channel, DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent
from core.config import NudgeConfig
from followups.models import FollowUp
from messaging import chat, chat_words
from messaging.models import ChatRecord
from scheduled_sends.day import Item
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope
from tests.fakes.fixtures import WHATSAPP_FROM

from .test_nudge_actions import (  # noqa: F401 — fixtures
    CHAT,
    JOIN,
    NUMBER,
    OTHER_CHAT,
    _now,
    ana,
    bea,
    buttons,
    linked,
    pending_rows,
    poll,
    post_inbound,
    post_update,
    tg,
    twiml_text,
    wa,
)

BERLIN = ZoneInfo("Europe/Berlin")


def follow_ups(user) -> list[FollowUp]:
    with tenant_scope(user.pk):
        return list(FollowUp.objects.filter(user_id=user.pk).order_by("pk"))


def set_zone(user, zone: str = "Europe/Berlin", **fields) -> None:
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(timezone=zone, **fields)


def replies(fake) -> list:
    return [d for d in fake.delivered_to(str(CHAT))]


def test_telegram_capture_creates_one_follow_up_whose_nudge_is_delivered(tg, ana):
    now = _now()
    set_zone(ana)
    tg.push_message(CHAT, "in 30 minutes check the oven")
    poll(now)

    [made] = follow_ups(ana)
    due = (now + timedelta(minutes=30)).replace(second=0)
    assert (made.title, made.due_at) == ("check the oven", due)
    assert made.reminder_minutes == []  # the person's default lead
    [confirmation] = replies(tg)
    local = due.astimezone(BERLIN)
    assert confirmation.text == f"Saved: “check the oven” at {local:%H:%M}."
    message_id = int(confirmation.message_id.split(":")[1])
    assert list(buttons(tg, message_id)) == ["Undo", "Change time"]
    # The sweep delivers its nudge like any follow-up's.
    [row] = pending_rows(ana)
    assert run_deliver(row.intended_at).sent == 1
    assert "check the oven" in tg.delivered[-1].text


def test_telegram_undo_withdraws_the_capture_and_its_nudge(tg, ana):
    now = _now()
    tg.push_message(CHAT, "/remind in 45 minutes call Anna")
    poll(now)
    [confirmation] = replies(tg)
    message_id = int(confirmation.message_id.split(":")[1])
    assert len(pending_rows(ana)) == 1
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Undo"]["callback_data"])
    poll(now)
    assert follow_ups(ana) == []
    assert pending_rows(ana) == []
    assert tg.text_of(CHAT, message_id).endswith("Undone: “call Anna” is deleted.")
    # The same Undo again (another tap on a stale message) deletes nothing more.
    tg.push_tap(CHAT, message_id, buttons(tg, message_id).get("Undo", {}).get("callback_data", ""))
    poll(now)


def test_a_replayed_telegram_update_creates_nothing_twice(tg, ana, client):
    update = tg.push_message(CHAT, "tomorrow at 9 call Anna")
    first = post_update(client, update)
    assert first.json()["text"].startswith("Saved: “call Anna” tomorrow at 09:00")
    assert post_update(client, update).content == b""
    assert len(follow_ups(ana)) == 1


def test_ambiguous_text_is_asked_back_and_a_choice_creates_it(tg, ana):
    # 15:00 in Berlin: "at 9" is either 21:00 today or 09:00 tomorrow.
    now = datetime(2026, 12, 3, 14, 0, tzinfo=ZoneInfo("UTC"))
    set_zone(ana)
    tg.push_message(CHAT, "at 9 call Anna")
    poll(now)
    assert follow_ups(ana) == []
    [asked] = replies(tg)
    assert asked.text == "When exactly, for “call Anna”?"
    message_id = int(asked.message_id.split(":")[1])
    choices = buttons(tg, message_id)
    assert list(choices) == ["at 21:00", "tomorrow at 09:00"]
    tg.push_tap(CHAT, message_id, choices["tomorrow at 09:00"]["callback_data"])
    tg.push_tap(CHAT, message_id, choices["at 21:00"]["callback_data"])  # too late: once
    poll(now)
    [made] = follow_ups(ana)
    assert made.due_at == datetime(2026, 12, 4, 9, 0, tzinfo=BERLIN)


def test_text_without_a_time_gets_an_example_and_chatter_help_once_an_hour(tg, ana):
    now = _now()
    tg.push_message(CHAT, "remind me to call Anna")
    tg.push_message(CHAT, "hello")
    tg.push_message(CHAT, "how are you")
    poll(now)
    texts = [r.text for r in replies(tg)]
    assert texts[0].startswith("When should I remind you?")
    assert "tomorrow at 9 call Anna" in texts[0]
    assert texts[1] == str(chat_words.HELP)
    assert len(texts) == 2  # the second chatter within the hour: no answer
    assert follow_ups(ana) == []


def test_captures_answer_in_the_persons_language_and_clock(tg, ana):
    now = datetime(2026, 12, 3, 14, 0, tzinfo=ZoneInfo("UTC"))
    set_zone(ana, language="de")
    tg.push_message(CHAT, "morgen um 9 Anna anrufen")
    poll(now)
    [made] = follow_ups(ana)
    assert (made.title, made.due_at) == ("Anna anrufen", datetime(2026, 12, 4, 9, tzinfo=BERLIN))
    [said] = replies(tg)
    assert said.text == "Gespeichert: „Anna anrufen“ morgen um 09:00."
    set_zone(ana, language="en", clock="12h")
    tg.push_message(CHAT, "tomorrow at 18:30 gym")
    poll(now)
    assert replies(tg)[-1].text == "Saved: “gym” tomorrow at 6:30 PM."


def test_a_stopped_chat_creates_nothing_until_start(tg, ana):
    now = _now()
    tg.push_message(CHAT, "/stop")
    tg.push_message(CHAT, "in 2 hours check the oven")
    poll(now)
    assert follow_ups(ana) == []
    assert replies(tg)[-1].text == str(chat_words.NOT_CONSENTING)
    tg.push_message(CHAT, "/start")
    tg.push_message(CHAT, "in 2 hours check the oven")
    poll(now)
    assert len(follow_ups(ana)) == 1


def test_captures_are_capped_per_hour(tg, ana):
    now = _now()
    for i in range(chat.CAPTURES_PER_HOUR + 1):
        tg.push_message(CHAT, f"in {i + 10} minutes task {i}")
    poll(now)
    assert len(follow_ups(ana)) == chat.CAPTURES_PER_HOUR
    assert replies(tg)[-1].text.startswith("Not saved: that is 20 captures in the last hour")


def test_a_refused_capture_says_why_in_the_persons_language_not_the_apis_words(tg, ana, settings):
    settings.NUDGE_MAX_FOLLOW_UPS_PER_USER = 1
    now = _now()
    set_zone(ana, language="de")
    tg.push_message(CHAT, "in 30 Minuten Ofen prüfen")
    tg.push_message(CHAT, "in 40 Minuten Anna anrufen")
    poll(now)
    assert [f.title for f in follow_ups(ana)] == ["Ofen prüfen"]
    assert replies(tg)[-1].text == (
        "Nicht gespeichert: Du hast so viele Wiedervorlagen wie erlaubt. "
        "Lösche welche, um neue hinzuzufügen."
    )


def test_next_and_today_answer_from_the_persons_own_rows_only(tg, ana, make_user):
    now = _now().replace(hour=10, minute=0)
    other = linked(make_user, Channel.TELEGRAM, str(OTHER_CHAT))
    with tenant_scope(other.pk):
        FollowUp.objects.create(
            user=other, title="Other's secret", due_at=now + timedelta(minutes=5)
        )
    with tenant_scope(ana.pk):
        FollowUp.objects.create(user=ana, title="Water plants", due_at=now + timedelta(hours=2))
        FollowUp.objects.create(user=ana, title="Call Bob", due_at=now + timedelta(hours=3))
        FollowUp.objects.create(user=ana, title="Next week", due_at=now + timedelta(days=3))
    tg.push_message(CHAT, "/next")
    tg.push_message(CHAT, "today")
    poll(now)
    next_answer, today_answer = (r.text for r in replies(tg))
    assert next_answer == "Next: Water plants at 12:00"
    assert today_answer == "Today:\n• 12:00 Water plants\n• 13:00 Call Bob"
    assert "secret" not in next_answer + today_answer


def _all_day(user, title: str, day: datetime, days: int = 1) -> None:
    """An all-day event as the providers store it: from the day's midnight to the next."""
    with tenant_scope(user.pk):
        connection, _ = CalendarConnection.objects.get_or_create(user=user, provider="ics")
        CalendarEvent.objects.create(
            user=user,
            connection=connection,
            provider_event_id=title,
            title=title,
            starts_at=day,
            ends_at=day + timedelta(days=days),
            all_day=True,
        )


def test_all_day_events_are_said_all_day_in_next_and_today(tg, ana):
    """Like the morning agenda: 'ganztägig', not 'um 00:00'; /today keeps today's
    all-day event (and a trip's second day) though its midnight has passed, and not
    tomorrow's, which starts at today's end."""
    set_zone(ana, language="de")
    midnight = datetime(2026, 12, 3, tzinfo=BERLIN)  # a Thursday
    _all_day(ana, "Urlaub", midnight)
    _all_day(ana, "Dienstreise", midnight - timedelta(days=1), days=2)
    _all_day(ana, "Messe", midnight + timedelta(days=1))
    with tenant_scope(ana.pk):
        FollowUp.objects.create(user=ana, title="Anna anrufen", due_at=midnight.replace(hour=12))
    tg.push_message(CHAT, "/today")
    poll(midnight.replace(hour=10))
    tg.push_message(CHAT, "/next")
    poll(midnight.replace(hour=13))
    today_answer, next_answer = (r.text for r in replies(tg))
    assert today_answer == (
        "Heute:\n• ganztägig Dienstreise\n• ganztägig Urlaub\n• 12:00 Anna anrufen"
    )
    assert next_answer == "Als Nächstes: Messe morgen ganztägig"


def test_help_lists_the_commands_and_the_menu_is_set_per_language(tg, ana, capsys, settings):
    tg.push_message(CHAT, "/help")
    poll(_now())
    assert "/next" in replies(tg)[-1].text and "/today" in replies(tg)[-1].text
    settings.TELEGRAM_WEBHOOK_SECRET = "s3cret"
    call_command("telegram_webhook", "set", "--url", "https://nudge.example/telegram/webhook")
    assert set(tg.command_menus) == {"", "de", "es", "fr", "pt"}
    assert [c["command"] for c in tg.command_menus[""]] == [
        "next",
        "today",
        "remind",
        "agenda",
        "help",
        "stop",
    ]
    assert tg.command_menus["de"][0]["description"] == "Was als Nächstes kommt"


def test_whatsapp_capture_undo_new_time_and_a_numbered_choice(wa, bea, fake_twilio, client):
    now = _now()

    def say(text: str, **kw) -> str:
        form = fake_twilio.inbound(NUMBER, text, to=WHATSAPP_FROM)
        return twiml_text(post_inbound(client, fake_twilio, form))

    form = fake_twilio.inbound(
        NUMBER, "remind me in 30 minutes to water the plants", to=WHATSAPP_FROM
    )
    said = twiml_text(post_inbound(client, fake_twilio, form))
    # Today, or tomorrow when the test runs in the last half hour of the day.
    assert re.match(r"Saved: “water the plants” (tomorrow )?at \d\d:\d\d", said), said
    assert "Reply “undo” to delete it, or send a new time to change it." in said
    assert twiml_text(post_inbound(client, fake_twilio, form)) == ""  # the replay
    [made] = follow_ups(bea)
    [row] = pending_rows(bea)
    assert run_deliver(row.intended_at).sent == 1
    assert "water the plants" in fake_twilio.delivered[-1].params["Body"]

    moved_to = say("in 2 hours")
    assert re.match(r"Moved: “water the plants” (tomorrow )?at \d\d:\d\d", moved_to), moved_to
    [moved] = follow_ups(bea)
    assert moved.pk == made.pk
    assert abs(moved.due_at - (now + timedelta(hours=2))) < timedelta(minutes=2)
    assert say("undo") == "Undone: “water the plants” is deleted."
    assert follow_ups(bea) == []

    asked = say("tomorrow dentist")
    assert "1. tomorrow at 09:00\n2. tomorrow at 14:00\n3. tomorrow at 18:00" in asked
    assert say("2").startswith("Saved: “dentist” tomorrow at 14:00")
    [dentist] = follow_ups(bea)
    assert dentist.due_at.astimezone(ZoneInfo("UTC")).hour == 14
    # STOP keeps its meaning: nothing is created after it.
    say("STOP")
    say("in 2 hours anything")
    assert len(follow_ups(bea)) == 1


def test_captures_show_in_the_api_like_any_follow_up(tg, ana, client):
    from portal.tokens import new_api_token

    tg.push_message(CHAT, "in 2 hours check the oven")
    poll(_now())
    with tenant_scope(ana.pk):
        _, token = new_api_token(ana.pk, "test")
    listed = client.get("/api/follow-ups", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert [f["title"] for f in listed["follow_ups"]] == ["check the oven"]


def test_the_delivery_path_never_imports_dateparser():
    code = (
        "import django, sys; django.setup(); "
        "import sweeps.management.commands.deliver, sweeps.deliver, messaging.webhooks; "
        "from messaging.telegram import send; from messaging.whatsapp import send as w; "
        "assert 'dateparser' not in sys.modules, 'dateparser was imported'"
    )
    env = {"DJANGO_SETTINGS_MODULE": "nudgeproject.settings"}
    import os

    result = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_the_agenda_is_offered_from_the_chat(tg, ana):
    now = datetime(2026, 12, 3, 14, 0, tzinfo=ZoneInfo("UTC"))
    set_zone(ana, language="de")
    tg.push_message(CHAT, "/agenda 7:30")
    tg.push_message(CHAT, "/agenda whenever")
    poll(now)
    with tenant_scope(ana.pk):
        assert DeliverySettings.objects.get(user_id=ana.pk).agenda_at.isoformat() == "07:30:00"
    set_text, how_text = (r.text for r in replies(tg))
    assert set_text == "Deine Tagesübersicht kommt jeden Tag, zuerst morgen um 07:30."
    assert how_text.startswith("Sende „/agenda 7:30“")
    tg.push_message(CHAT, "/agenda off")
    poll(now)
    with tenant_scope(ana.pk):
        assert DeliverySettings.objects.get(user_id=ana.pk).agenda_at is None


@pytest.mark.parametrize(
    ("language", "text", "agenda_at"),
    [
        ("fr", "/agenda 7h", "07:00:00"),
        ("fr", "/agenda 19h30", "19:30:00"),
        ("de", "/agenda 19 Uhr", "19:00:00"),
        ("de", "/agenda um 8", "08:00:00"),
        ("de", "/agenda 7.30", "07:30:00"),
        ("en", "/agenda 7", "07:00:00"),
        ("en", "/agenda 7:30 pm", "19:30:00"),
        ("en", "/agenda 7:30pm", "19:30:00"),
        ("en", "/agenda 7 : 30", "07:30:00"),
        ("en", "/agenda 12 am", "00:00:00"),
        ("fr", "/agenda désactiver", None),
        ("fr", "/agenda desactiver", None),
        ("es", "/agenda desactivar", None),
        ("pt-br", "/agenda desativar", None),
        ("de", "/agenda Aus", None),
        # Not a time alone: asked again, the agenda kept.
        ("en", "/agenda 25", "06:15:00"),
        ("de", "/agenda 8 Uhr morgen", "06:15:00"),
    ],
)
def test_the_agenda_takes_the_hours_a_capture_takes_and_off_with_its_accents(
    tg, ana, language, text, agenda_at
):
    set_zone(ana, language=language, agenda_at=time(6, 15))
    config = NudgeConfig.from_settings()
    said = chat.answer(Channel.TELEGRAM, str(CHAT), text, _now(), config).text
    with tenant_scope(ana.pk):
        at = DeliverySettings.objects.get(user_id=ana.pk).agenda_at
    assert (at.isoformat() if at else None) == agenda_at, said
    assert ("/agenda 7:30" in said) == (agenda_at == "06:15:00")  # the how-to, or not


def test_the_chats_records_are_kept_a_day(tg, ana):
    now = _now()
    tg.push_message(CHAT, "in 2 hours check the oven")
    poll(now - timedelta(days=2))
    tg.push_message(CHAT, "in 3 hours check the oven again")
    poll(now)
    with tenant_scope(ana.pk):
        kept = list(ChatRecord.objects.filter(user_id=ana.pk).values_list("title", flat=True))
    assert kept == ["check the oven again"]


def test_stop_and_start_answer_in_the_persons_language(tg, ana):
    set_zone(ana, language="de")
    tg.push_message(CHAT, "/stop")
    tg.push_message(CHAT, "/start")
    tg.push_message(CHAT, "/start")
    poll(_now())
    paused, resumed, again = (r.text for r in replies(tg))
    assert paused == "Pausiert: keine Erinnerungen mehr hier. Sende /start, um sie fortzusetzen."
    assert resumed == "Fortgesetzt: Deine Erinnerungen kommen wieder hier an."
    assert again == (
        "Dieser Chat ist schon verknüpft. Sende /stop, um die Erinnerungen zu pausieren."
    )


def test_a_number_off_the_ask_backs_list_gets_the_choices_again(tg, ana):
    now = datetime(2026, 12, 3, 14, 0, tzinfo=ZoneInfo("UTC"))
    set_zone(ana, language="de")
    tg.push_message(CHAT, "morgen Zahnarzt")
    tg.push_message(CHAT, "5")
    poll(now)
    asked, again = replies(tg)
    assert again.text == asked.text == "Wann genau, für „Zahnarzt“?"
    message_id = int(again.message_id.split(":")[1])
    assert list(buttons(tg, message_id)) == [
        "morgen um 09:00",
        "morgen um 14:00",
        "morgen um 18:00",
    ]
    assert follow_ups(ana) == []
    tg.push_message(CHAT, "2")
    poll(now)
    [made] = follow_ups(ana)
    assert made.due_at == datetime(2026, 12, 4, 14, 0, tzinfo=BERLIN)


def test_a_long_today_fits_one_whatsapp_message_and_says_what_is_left(wa, bea):
    now = datetime(2026, 12, 3, 0, 1, tzinfo=ZoneInfo("UTC"))
    with tenant_scope(bea.pk):
        for i in range(30):
            title = f"Punkt {i:02} " + "wichtige Besprechung mit dem Team " * 3
            FollowUp.objects.create(user=bea, title=title, due_at=now + timedelta(minutes=20 + i))
    set_zone(bea, zone="UTC", language="de")
    config = NudgeConfig.from_settings()
    said = chat.answer(Channel.WHATSAPP, NUMBER, "/today", now, config).for_whatsapp()
    assert len(said) <= 1600  # WhatsApp's limit: a longer answer never arrives
    lines = said.split("\n")
    assert lines[0] == "Heute:" and lines[1].startswith("• 00:21 Punkt 00")
    assert re.fullmatch(r"… und \d+ weitere", lines[-1]), lines[-1]


def test_todays_join_buttons_cut_a_long_title_at_a_word():
    now = datetime(2026, 12, 3, 9, 0, tzinfo=ZoneInfo("UTC"))
    reader = DeliverySettings(timezone="UTC", language="en", clock="24h")
    title = "Quarterly planning with the partners from the northern region 👨‍👩‍👧"
    item = Item("event", 1, now + timedelta(hours=1), title, join_url="https://meet.example/x")
    [button] = chat_words.today(reader, [item], now).buttons
    assert button.label == "Join: Quarterly planning with the partners…"
