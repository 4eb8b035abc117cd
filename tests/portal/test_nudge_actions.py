"""Issue 22, items 2-4: Snooze and Done from the nudge itself.

Nudges are sent by the real delivery sweep through the real clients
(python-telegram-bot, twilio) to the fake providers; taps come back the way
the providers send them — a ``callback_query`` served by the fake Bot API's
``getUpdates`` (``telegram_poll``) or posted to the webhook, and a signed
inbound form from the fake Twilio.
"""

from __future__ import annotations

import io
import json
import re
import threading
from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext

from accounts.models import Channel, DeliverySettings
from core.config import NudgeConfig
from followups import capture
from followups.models import FollowUp
from messaging import action_tokens, chat_words
from messaging import addresses as account
from messaging.channels.base import NudgeActions
from messaging.messages import clock_text
from messaging.nudge_actions import NOT_HERE, tap
from messaging.telegram import bot as telegram
from messaging.telegram.send import TelegramChannel
from portal import timeline
from scheduled_sends.models import NudgeAct, ScheduledSend
from sweeps.deliver import run_deliver
from sweeps.replan import materialize_user
from tenancy.scope import tenant_scope
from tests.channels.conftest import nudge
from tests.channels.queue import queue_follow_up
from tests.fakes.fixtures import WHATSAPP_FROM
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.twilio_server import FakeTwilio
from tests.followups.test_capture_phrases import CAPTURES
from tests.support.queue import queue_nudge
from tests.support.timeline import describe

from .conftest import WEBHOOK_SECRET, local_input

CHAT = 5550001
READER = DeliverySettings()  # the users' defaults: UTC, English, 24-hour clock
OTHER_CHAT = 5550002
NUMBER = "+4915112345678"
INBOUND_URL = "https://nudge.example/twilio/inbound"
ACTIONS_TEMPLATE = "HX" + "ac71" * 8
JOIN = "https://meet.google.com/abc-defg-hij"


def _now() -> datetime:
    return timezone.now().replace(microsecond=0)


def linked(make_user, channel: str, address: str, **fields):
    """A user whose chat or number is linked (in the address directory), as /start does."""
    user = make_user(**fields)
    account.link_address(user.pk, channel, "test", _now(), lambda: address)
    return user


def pending_rows(user) -> list[ScheduledSend]:
    with tenant_scope(user.pk):
        return list(
            ScheduledSend.objects.filter(user_id=user.pk, outcome__isnull=True).order_by(
                "intended_at"
            )
        )


def acts(user) -> list[NudgeAct]:
    with tenant_scope(user.pk):
        return list(NudgeAct.objects.filter(user_id=user.pk).order_by("pk"))


def sent_nudge(fake: FakeTelegram, user, title: str, *, due_in: timedelta, now: datetime):
    """A follow-up nudge delivered by the sweep: (queue row, its message id in the chat)."""
    row = queue_follow_up(user, title, now=now, starts_in=due_in)
    assert run_deliver(now).sent == 1
    delivered = fake.delivered[-1]
    return row, int(delivered.message_id.split(":")[1])


def buttons(fake: FakeTelegram, message_id: int, chat: int = CHAT) -> dict[str, dict]:
    markup = fake.markup_of(chat, message_id) or {"inline_keyboard": []}
    return {button["text"]: button for row in markup["inline_keyboard"] for button in row}


def poll(now: datetime) -> None:
    """One telegram_poll round through the real library against the fake."""
    channel = TelegramChannel()
    try:
        telegram.poll_once(channel, telegram.resume_offset(), 0, now, NudgeConfig.from_settings())
    finally:
        channel.close()


def answers(fake: FakeTelegram) -> list[str]:
    return [call.params.get("text", "") for call in fake.calls("answerCallbackQuery")]


@pytest.fixture
def tg(bot, fake_telegram):
    return fake_telegram


@pytest.fixture
def ana(make_user, tg):
    return linked(make_user, Channel.TELEGRAM, str(CHAT))


# --- the buttons ---------------------------------------------------------------------


def test_a_follow_up_nudge_carries_snooze_and_done_bound_to_its_row_and_chat(tg, ana):
    """Item 2: an inline keyboard on each nudge; callback data signed, short, no bare id."""
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Send the invoice", due_in=timedelta(minutes=30), now=now)
    keys = buttons(tg, message_id)
    assert list(keys) == ["Snooze 10 min", "Done"]
    for button in keys.values():
        data = button["callback_data"]
        assert len(data.encode()) <= 64
        assert data != str(row.pk)
        assert action_tokens.verify(data, str(CHAT)).send_id == row.pk
        assert action_tokens.verify(data, str(OTHER_CHAT)) is None


def test_a_nudge_sent_at_the_start_offers_no_snooze(tg, ana):
    """A snooze after the start is refused ("Not snoozed: it started at …"), so the nudge
    for the start itself carries only Done."""
    now = _now()
    queue_follow_up(ana, "Call Bea", now=now, starts_in=timedelta(0), fired_ago=timedelta(0))
    assert run_deliver(now).sent == 1
    message_id = int(tg.delivered[-1].message_id.split(":")[1])
    assert tg.text_of(CHAT, message_id).startswith("Reminder: Call Bea is due now")
    assert list(buttons(tg, message_id)) == ["Done"]


def test_an_event_with_a_link_has_join_and_snooze_but_no_done(tg, telegram_settings):
    """Item 2: Join is a URL button when there is a link; Done only for follow-ups."""
    channel = TelegramChannel()
    try:
        actions = NudgeActions(send_id=41, snooze_minutes=10, can_mark_done=False)
        channel.send(str(CHAT), nudge(join_url=JOIN, actions=actions))
    finally:
        channel.close()
    keys = buttons(tg, 1)
    assert list(keys) == ["Join", "Snooze 10 min"]
    assert keys["Join"] == {"text": "Join", "url": JOIN}
    # Without a link and without actions (the console, a test message): no keyboard.
    channel = TelegramChannel()
    try:
        channel.send(str(CHAT), nudge())
    finally:
        channel.close()
    assert tg.markup_of(CHAT, 2) is None


def test_snooze_queues_one_nudge_ten_minutes_on_and_edits_the_message(tg, ana, client):
    """Items 2 and 4: Snooze answers the callback, edits the message, queues one nudge."""
    now = _now()
    _row, message_id = sent_nudge(
        tg, ana, "Send the invoice", due_in=timedelta(minutes=30), now=now
    )
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    poll(now)

    until = (now + timedelta(minutes=10)).replace(second=0) + timedelta(
        minutes=1 if now.second else 0
    )
    said = f"Snoozed until {clock_text(READER, until, now)}"
    assert answers(tg) == [said]
    assert tg.text_of(CHAT, message_id).endswith(f"\n\n{said}")
    assert tg.markup_of(CHAT, message_id) is None  # the used buttons are gone
    [snoozed] = pending_rows(ana)
    assert snoozed.intended_at == until
    # Materialize plans it again rather than withdrawing it as unplanned (beside the
    # follow-up's own reminder, the default lead before it is due).
    materialize_user(ana.pk, now, NudgeConfig.from_settings())
    assert until in [r.intended_at for r in pending_rows(ana)]
    # The history says so.
    with tenant_scope(ana.pk):
        [entry] = [e for e in timeline.history(ana.pk, now) if e.status == "snoozed"]
    assert entry.title == "Send the invoice"
    assert describe(entry).startswith(f"snoozed: until {clock_text(READER, until, now)}")
    client.force_login(ana)
    home = client.get(reverse("portal:home")).content.decode()
    assert f"until {clock_text(READER, until, now)}, from Telegram" in home and ">snoozed<" in home


def test_a_person_on_the_12_hour_clock_reads_12_hour_times_after_a_tap(tg, ana, client):
    """The tap's answer, the history and the follow-ups page all on the person's clock."""
    with tenant_scope(ana.pk):
        DeliverySettings.objects.filter(user_id=ana.pk).update(clock="12h")
    now = _now()
    _row, message_id = sent_nudge(
        tg, ana, "Send the invoice", due_in=timedelta(minutes=30), now=now
    )
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    poll(now)

    [said] = answers(tg)
    twelve_hour = re.compile(r"\d{1,2}:\d{2}\s?[AP]M")
    assert twelve_hour.search(said), said
    client.force_login(ana)
    home = client.get(reverse("portal:home")).content.decode()
    until = twelve_hour.search(said).group(0)
    # Past midnight on the person's clock the entry names the day ("until Sun 12:07 AM").
    assert re.search(rf"until (\w+ )?{re.escape(until)}, from Telegram", home), until
    listed = client.get(reverse("portal:follow_ups")).content.decode()
    assert twelve_hour.search(listed), "the follow-ups list shows 24-hour times"
    added = client.post(
        reverse("portal:follow_ups"),
        {"title": "Water the plants", "due_at": local_input(now + timedelta(hours=5), UTC)},
        follow=True,
    ).content.decode()
    assert "Added “Water the plants”, due" in added
    assert twelve_hour.search(added.split("Added “Water the plants”, due", 1)[1][:40])


def test_a_double_tap_queues_one_nudge_and_says_so(tg, ana):
    """Item 4: idempotent: two taps on the same button queue one nudge."""
    now = _now()
    _row, message_id = sent_nudge(tg, ana, "Call Bea", due_in=timedelta(minutes=30), now=now)
    data = buttons(tg, message_id)["Snooze 10 min"]["callback_data"]
    tg.push_tap(CHAT, message_id, data)
    tg.push_tap(CHAT, message_id, data)
    poll(now)
    first, second = answers(tg)
    assert first.startswith("Snoozed until ")
    assert second == first.replace("Snoozed", "Already snoozed")
    assert len(pending_rows(ana)) == 1
    assert len(acts(ana)) == 1
    assert len(tg.calls("editMessageText")) == 1


def test_a_tap_from_another_chat_does_nothing_and_says_why(tg, ana, make_user):
    """Item 2: callback data is bound to the chat the nudge went to."""
    linked(make_user, Channel.TELEGRAM, str(OTHER_CHAT))
    now = _now()
    _row, message_id = sent_nudge(tg, ana, "Call Bea", due_in=timedelta(minutes=30), now=now)
    data = buttons(tg, message_id)["Done"]["callback_data"]
    tg.push_tap(CHAT, message_id, data, in_chat=OTHER_CHAT)
    # A token edited to name another row fails too.
    tg.push_tap(CHAT, message_id, data[0] + "1" + data[2:] if data[1] != "1" else "d2" + data[2:])
    poll(now)
    assert answers(tg) == [NOT_HERE] * 2
    assert tg.calls("editMessageText") == []
    assert acts(ana) == []
    with tenant_scope(ana.pk):
        assert not FollowUp.objects.get(user_id=ana.pk).done


def test_a_tap_after_the_start_does_not_snooze(tg, ana):
    """Item 4: never after the subject starts; the answer says it has started."""
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Call Bea", due_in=timedelta(minutes=5), now=now)
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    later = row.subject_starts_at + timedelta(minutes=1)
    poll(later)
    assert answers(tg) == [
        f"Not snoozed: it started at {clock_text(READER, row.subject_starts_at, later)}"
    ]
    assert pending_rows(ana) == []
    assert tg.calls("editMessageText") == []


def test_a_snooze_past_the_start_comes_at_the_start(tg, ana):
    """Item 4: never after the subject starts — a 10-minute snooze 5 minutes before is at it."""
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Call Bea", due_in=timedelta(minutes=5), now=now)
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    poll(now)
    start = clock_text(READER, row.subject_starts_at, now)
    assert answers(tg) == [f"Snoozed until {start}, when it starts"]
    [snoozed] = pending_rows(ana)
    assert snoozed.intended_at == row.subject_starts_at


def _quiet(user, start: datetime, end: datetime) -> None:
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            quiet_start=time(start.hour, start.minute), quiet_end=time(end.hour, end.minute)
        )


def test_snooze_into_quiet_hours_waits_for_their_end_or_is_refused(tg, ana):
    """Item 4: inside quiet hours, the existing rule: held to their end, or refused when
    they last past the start; the answer says which."""
    now = _now()
    quiet_from = (now + timedelta(minutes=2)).replace(second=0)
    quiet_to = (now + timedelta(minutes=40)).replace(second=0)
    _soon, soon_id = sent_nudge(tg, ana, "Soon", due_in=timedelta(minutes=30), now=now)
    later, later_id = sent_nudge(tg, ana, "Later", due_in=timedelta(minutes=90), now=now)
    _quiet(ana, quiet_from, quiet_to)
    tg.push_tap(CHAT, soon_id, buttons(tg, soon_id)["Snooze 10 min"]["callback_data"])
    tg.push_tap(CHAT, later_id, buttons(tg, later_id)["Snooze 10 min"]["callback_data"])
    poll(now)
    end = clock_text(READER, quiet_to, now)
    assert answers(tg) == [
        f"Not snoozed: your quiet hours last until {end}, past its start",
        f"Snoozed until {end}, when your quiet hours end",
    ]
    [held] = pending_rows(ana)
    assert (held.ref_id, held.intended_at) == (later.ref_id, quiet_to)


def test_done_marks_the_follow_up_done_and_withdraws_both_pending_reminders(tg, ana):
    """Item 4: Done on a follow-up with two pending reminders (two intended instants)."""
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Pay rent", due_in=timedelta(minutes=40), now=now)
    for minutes in (10, 20):
        queue_nudge(
            ana.pk,
            ref_id=row.ref_id,
            at=now + timedelta(minutes=minutes),
            subject_starts_at=row.subject_starts_at,
        )
    assert len(pending_rows(ana)) == 2
    data = buttons(tg, message_id)["Done"]["callback_data"]
    tg.push_tap(CHAT, message_id, data)
    tg.push_tap(CHAT, message_id, data)
    poll(now)
    assert answers(tg) == ["Done ✓", "Already done ✓"]
    assert tg.text_of(CHAT, message_id).endswith("\n\nDone ✓")
    assert pending_rows(ana) == []
    with tenant_scope(ana.pk):
        assert FollowUp.objects.get(pk=row.ref_id).done
        history = timeline.history(ana.pk, now)
    assert [describe(e) for e in history if e.status == "done"] == ["done: from Telegram"]


# --- the webhook -------------------------------------------------------------------------


def post_update(client, update: dict):
    return client.post(
        reverse("telegram-webhook"),
        json.dumps(update),
        content_type="application/json",
        HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN=WEBHOOK_SECRET,
    )


def test_the_webhook_answers_the_callback_and_edits_the_message_keeping_join(tg, ana, client):
    """Item 2: callback_query through the webhook: answered in the response body, the
    message edited outbound, its Join button kept; a replayed update does nothing."""
    now = _now()
    row = queue_follow_up(ana, "Standup", now=now, starts_in=timedelta(minutes=30))
    channel = TelegramChannel()
    try:
        actions = NudgeActions(send_id=row.pk, snooze_minutes=10, can_mark_done=True)
        channel.send(str(CHAT), nudge("Standup", join_url=JOIN, actions=actions))
    finally:
        channel.close()
    update = tg.push_tap(CHAT, 1, buttons(tg, 1)["Snooze 10 min"]["callback_data"])
    response = post_update(client, update)
    assert response.status_code == 200
    answer = response.json()
    assert answer["method"] == "answerCallbackQuery"
    assert answer["callback_query_id"] == update["callback_query"]["id"]
    assert answer["text"].startswith("Snoozed until ")
    assert tg.text_of(CHAT, 1).endswith(answer["text"])
    assert tg.markup_of(CHAT, 1) == {"inline_keyboard": [[{"text": "Join", "url": JOIN}]]}
    assert len(pending_rows(ana)) == 2  # the original (unsent here) and the snoozed one
    # A replay of the same update: no answer, no second edit, nothing queued.
    assert post_update(client, update).content == b""
    assert len(tg.calls("editMessageText")) == 1
    assert len(acts(ana)) == 1


def test_webhook_and_polling_ask_telegram_for_callback_queries(tg, db):
    """Item 2: allowed_updates must include callback_query, or taps never arrive."""
    call_command("telegram_webhook", "set", "--url", "https://nudge.example/telegram/webhook")
    call_command("telegram_webhook", "delete")
    call_command("telegram_poll", "--once", "--timeout", "0")
    assert tg.calls("setWebhook")[0].params["allowed_updates"] in (
        '["message", "callback_query"]',
        ["message", "callback_query"],
    )
    assert "callback_query" in str(tg.calls("getUpdates")[0].params["allowed_updates"])


# --- WhatsApp ---------------------------------------------------------------------------


@pytest.fixture
def wa(twilio_settings):
    twilio_settings.TWILIO_INBOUND_URL = INBOUND_URL
    twilio_settings.TWILIO_ACTIONS_CONTENT_SID = ""
    return twilio_settings


@pytest.fixture
def bea(make_user, wa):
    return linked(make_user, Channel.WHATSAPP, NUMBER)


def post_inbound(client, fake: FakeTwilio, params: dict[str, str]):
    return client.post(
        reverse("twilio-inbound"),
        params,
        HTTP_X_TWILIO_SIGNATURE=fake.signature(INBOUND_URL, params),
    )


def twiml_text(response) -> str:
    body = response.content.decode()
    assert response["Content-Type"].startswith("text/xml")
    return body.split("<Message>", 1)[1].split("</Message>", 1)[0] if "<Message>" in body else ""


def test_whatsapp_text_replies_snooze_and_done_act_on_the_last_nudge(wa, bea, fake_twilio, client):
    """Item 3: without a template, "snooze" and "done" act on the last nudge (24-hour window)."""
    now = _now()
    row = queue_follow_up(bea, "Water plants", now=now, starts_in=timedelta(minutes=30))
    assert run_deliver(now).sent == 1
    assert "Body" in fake_twilio.delivered[-1].params  # text: no template configured

    snoozed = post_inbound(
        client, fake_twilio, fake_twilio.inbound(NUMBER, "Snooze", to=WHATSAPP_FROM)
    )
    assert twiml_text(snoozed).startswith("Snoozed until ")
    assert len(pending_rows(bea)) == 1
    done = post_inbound(client, fake_twilio, fake_twilio.inbound(NUMBER, "done", to=WHATSAPP_FROM))
    assert twiml_text(done) == "Done ✓"
    assert pending_rows(bea) == []  # the snoozed nudge withdrawn too
    with tenant_scope(bea.pk):
        assert FollowUp.objects.get(pk=row.ref_id).done
    # A word from a number nobody linked: not ours to answer.
    stranger = post_inbound(
        client, fake_twilio, fake_twilio.inbound("+15550009999", "snooze", to=WHATSAPP_FROM)
    )
    assert twiml_text(stranger) == ""


@pytest.mark.parametrize(
    ("language", "later", "snoozed", "done", "answer"),
    [
        ("de", "später", "Verschoben bis ", "Erledigt!", "Erledigt ✓"),
        ("es", "Posponer", "Pospuesto hasta las ", "hecho", "Hecho ✓"),
        ("fr", "plus tard", "Reporté à ", "Fait.", "Fait ✓"),
        ("pt-br", "Adiar", "Adiado até ", "concluido", "Concluído ✓"),
    ],
)
def test_whatsapp_text_replies_in_the_persons_language_act_on_the_last_nudge(
    wa, bea, fake_twilio, client, language, later, snoozed, done, answer
):
    """A German, Spanish, French or Brazilian reply in their own words (accents or not)
    snoozes or marks done, as "snooze" / "done" do; not the help text."""
    with tenant_scope(bea.pk):
        DeliverySettings.objects.filter(user_id=bea.pk).update(language=language)
    now = _now()
    row = queue_follow_up(bea, "Blumen gießen", now=now, starts_in=timedelta(minutes=30))
    assert run_deliver(now).sent == 1

    def say(text: str) -> str:
        form = fake_twilio.inbound(NUMBER, text, to=WHATSAPP_FROM)
        return twiml_text(post_inbound(client, fake_twilio, form))

    assert say(later).startswith(snoozed)
    assert len(pending_rows(bea)) == 1
    assert say(done) == answer
    assert pending_rows(bea) == []
    with tenant_scope(bea.pk):
        assert FollowUp.objects.get(pk=row.ref_id).done


@pytest.mark.parametrize("language", ["en", "de", "es", "fr", "pt-br"])
def test_the_words_on_a_nudges_buttons_are_typed_replies_in_each_language(language):
    """What Telegram's buttons say (the catalogs' words) also works typed on WhatsApp."""
    with translation.override(language):
        snooze_label = gettext("Snooze %(minutes)s min") % {"minutes": 10}
        done_label = gettext("Done")
    assert any(chat_words.reply_word(word) == "snooze" for word in snooze_label.split())
    assert chat_words.reply_word(done_label) == "done"


def test_no_reply_word_is_a_capture_and_no_capture_is_a_reply_word():
    """A reply is the whole message: a follow-up typed in any language is never taken
    for Snooze or Done, and no reply word would have been read as one."""
    for word in chat_words.REPLY_WORDS:
        for language in ("en", "de", "es", "fr", "pt-br"):
            assert capture.parse(word, language, "Europe/Berlin", _now()) is None, word
    for _language, _zone, phrase, *_ in CAPTURES:
        assert chat_words.reply_word(phrase) is None, phrase


def test_whatsapp_reply_with_no_recent_nudge_says_so(wa, bea, fake_twilio, client):
    """Item 3: only a nudge within the 24-hour window is acted on."""
    response = post_inbound(
        client, fake_twilio, fake_twilio.inbound(NUMBER, "snooze", to=WHATSAPP_FROM)
    )
    assert twiml_text(response) == "There is no nudge from the last 24 hours to act on"
    assert pending_rows(bea) == []


def test_whatsapp_buttons_come_from_the_content_template_when_configured(
    wa, bea, fake_twilio, client
):
    """Item 3: quick replies through a Content template (content_sid + variables); the tapped
    button's payload is the signed token; a replayed inbound does nothing."""
    wa.TWILIO_ACTIONS_CONTENT_SID = ACTIONS_TEMPLATE
    now = _now()
    row = queue_follow_up(bea, "Water plants", now=now, starts_in=timedelta(minutes=30))
    assert run_deliver(now).sent == 1
    [(to, sid, variables)] = fake_twilio.templates()
    assert (to, sid) == (f"whatsapp:{NUMBER}", ACTIONS_TEMPLATE)
    assert variables["1"] == "Water plants"
    assert action_tokens.verify(variables["4"], NUMBER) == action_tokens.Claim("snooze", row.pk)
    assert action_tokens.verify(variables["5"], NUMBER) == action_tokens.Claim("done", row.pk)

    tap = fake_twilio.inbound(
        NUMBER, "Snooze 10 min", to=WHATSAPP_FROM, button_payload=variables["4"]
    )
    assert twiml_text(post_inbound(client, fake_twilio, tap)).startswith("Snoozed until ")
    assert twiml_text(post_inbound(client, fake_twilio, tap)) == ""  # the same MessageSid again
    assert len(pending_rows(bea)) == 1
    # The token works only from the number it was sent to.
    forged = fake_twilio.inbound(
        "+15550009999", "Done", to=WHATSAPP_FROM, button_payload=variables["5"]
    )
    assert "does not belong" in twiml_text(post_inbound(client, fake_twilio, forged))
    with tenant_scope(bea.pk):
        assert not FollowUp.objects.get(pk=row.ref_id).done


# --- caps -------------------------------------------------------------------------------


def test_a_snooze_counts_against_the_per_user_caps(tg, ana, settings):
    """Item 4: a snooze is counted by the per-user caps, and refused when they are full."""
    settings.NUDGE_MAX_NUDGES_PER_USER = 1
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Call Bea", due_in=timedelta(minutes=40), now=now)
    queue_nudge(
        ana.pk,
        ref_id=row.ref_id,
        at=now + timedelta(minutes=20),
        subject_starts_at=row.subject_starts_at,
    )
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    poll(now)
    assert answers(tg) == ["Not snoozed: you have as many nudges queued as allowed"]
    assert len(pending_rows(ana)) == 1


def test_tokens_fit_telegram_and_name_no_guessable_id():
    """Item 2: at most 64 bytes; tampering with the act, the row or the chat fails."""
    token = action_tokens.sign("snooze", 2**63 - 1, "-1001234567890")
    assert len(token.encode()) <= 64
    assert action_tokens.verify(token, "-1001234567890") == action_tokens.Claim("snooze", 2**63 - 1)
    assert action_tokens.verify("d" + token[1:], "-1001234567890") is None
    assert action_tokens.verify(token, "-1001234567891") is None
    assert action_tokens.verify(str(2**63 - 1), "-1001234567890") is None


@pytest.mark.django_db(transaction=True)
def test_two_taps_at_once_queue_one_nudge(make_user):
    """Item 4: idempotent under concurrency too (the webhook may take two updates at
    once): the second tap waits on the first's record and answers with it."""
    user = linked(make_user, Channel.TELEGRAM, str(CHAT))
    now = _now()
    row = queue_follow_up(user, "Call Bea", now=now, starts_in=timedelta(minutes=30))
    claim = action_tokens.verify(action_tokens.sign("snooze", row.pk, str(CHAT)), str(CHAT))
    config = NudgeConfig.from_settings()
    barrier = threading.Barrier(2)
    said: list[str] = []

    def press() -> None:
        try:
            barrier.wait(5)
            said.append(tap(Channel.TELEGRAM, str(CHAT), claim, now, config).text)
        finally:
            connection.close()

    threads = [threading.Thread(target=press) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(text.split(" until ")[0] for text in said) == ["Already snoozed", "Snoozed"]
    assert len(acts(user)) == 1
    assert len([r for r in pending_rows(user) if r.pk != row.pk]) == 1


def test_the_telegram_poll_command_answers_a_tap(tg, ana):
    """Item 2: ``manage.py telegram_poll`` handles callback_query like the webhook."""
    now = _now()
    _row, message_id = sent_nudge(tg, ana, "Pay rent", due_in=timedelta(minutes=40), now=now)
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Done"]["callback_data"])
    call_command("telegram_poll", "--once", "--timeout", "0", stdout=io.StringIO())
    assert answers(tg) == ["Done ✓"]
    assert tg.text_of(CHAT, message_id).endswith("Done ✓")


def test_snooze_on_a_later_occurrence_of_a_repeating_follow_up(tg, ana):
    """Items 2 and 4 with issue 24's repeating follow-ups: today's nudge of a daily
    follow-up first due two days ago snoozes (it starts at today's occurrence, not at
    the series' first time), and the next materialize keeps the snooze."""
    now = _now()
    row, message_id = sent_nudge(tg, ana, "Water the plants", due_in=timedelta(minutes=30), now=now)
    with tenant_scope(ana.pk):
        FollowUp.objects.filter(pk=row.ref_id).update(
            due_at=row.subject_starts_at - timedelta(days=2), repeat="daily", repeat_zone="UTC"
        )
    tg.push_tap(CHAT, message_id, buttons(tg, message_id)["Snooze 10 min"]["callback_data"])
    poll(now)
    until = (now + timedelta(minutes=10)).replace(second=0) + timedelta(
        minutes=1 if now.second else 0
    )
    assert answers(tg) == [f"Snoozed until {clock_text(READER, until, now)}"]
    materialize_user(ana.pk, now, NudgeConfig.from_settings())
    assert until in [r.intended_at for r in pending_rows(ana)]


def test_a_snooze_past_midnight_names_the_day_it_ends(make_user):
    """The history writes an entry's time alone: a snooze ending the next day says which."""
    from datetime import UTC, datetime

    from portal import timeline
    from scheduled_sends.models import NudgeAct

    ana = make_user()
    late = datetime(2026, 12, 4, 23, 57, tzinfo=UTC)  # a Friday
    with tenant_scope(ana.pk):
        for source, tapped in ((1, late), (2, late.replace(hour=20))):
            until = tapped + timedelta(minutes=10)
            NudgeAct.objects.create(
                user=ana,
                source_send_id=source,
                act=NudgeAct.Act.SNOOZE,
                kind="follow_up",
                ref_id=source,
                subject_starts_at=until + timedelta(hours=1),
                snoozed_until=until,
                via="telegram",
                created_at=tapped,
            )
        entries = timeline.history(ana.pk, late)
    words = sorted(describe(e) for e in entries if e.status == "snoozed")
    assert words == [
        "snoozed: until 21:07, from Telegram",
        "snoozed: until Sat 00:07, from Telegram",
    ]


def test_a_tap_that_cannot_act_says_why_in_the_persons_language(tg, ana):
    """Not "Nichts zu tun: follow-up deleted": the reason in the person's words too."""
    with tenant_scope(ana.pk):
        DeliverySettings.objects.filter(user_id=ana.pk).update(language="de")
    now = _now()
    done_row, done_id = sent_nudge(tg, ana, "Miete", due_in=timedelta(minutes=30), now=now)
    gone_row, gone_id = sent_nudge(tg, ana, "Müll", due_in=timedelta(minutes=40), now=now)
    _held, held_id = sent_nudge(tg, ana, "Post", due_in=timedelta(minutes=50), now=now)
    with tenant_scope(ana.pk):
        FollowUp.objects.filter(pk=done_row.ref_id).update(done=True)
        FollowUp.objects.filter(pk=gone_row.ref_id).delete()
    snooze = "10 Min. später"
    tg.push_tap(CHAT, done_id, buttons(tg, done_id)[snooze]["callback_data"])
    tg.push_tap(CHAT, gone_id, buttons(tg, gone_id)[snooze]["callback_data"])
    tg.push_tap(CHAT, gone_id, buttons(tg, gone_id)["Erledigt"]["callback_data"])
    poll(now)
    with tenant_scope(ana.pk):
        DeliverySettings.objects.filter(user_id=ana.pk).update(paused=True)
    tg.push_tap(CHAT, held_id, buttons(tg, held_id)[snooze]["callback_data"])
    poll(now)
    assert answers(tg) == [
        "Die Wiedervorlage war schon erledigt.",
        "Die Wiedervorlage wurde gelöscht.",
        "Die Wiedervorlage wurde gelöscht.",
        "Nicht verschoben: Deine Erinnerungen sind pausiert.",
    ]
