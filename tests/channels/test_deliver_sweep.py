"""Provider answers, end to end: the real deliver sweep, the real channels, the fake servers.

Each answer must settle the row the way the channel interface promises:
transient → retried on the next run; permanent → failed with the provider's
code; rate limited → not sent again before ``retry_after``, the channel paused
for that long, and the run carries on with it afterwards.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduled_sends.deliver import run_deliver
from tests.channels.queue import queue_follow_up, reload
from tests.fakes import telegram_server as telegram
from tests.fakes import twilio_server as twilio

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def channels(twilio_settings, telegram_settings):
    """Both real channels pointed at their fakes."""
    return twilio_settings


def telegram_user(make_user, chat_id: str):
    return make_user(channel="telegram", telegram_chat_id=chat_id)


def whatsapp_user(make_user, number: str):
    return make_user(channel="whatsapp", whatsapp_number=number)


def test_transient_error_is_retried_on_the_next_run(channels, make_user, fake_telegram, now):
    row = queue_follow_up(telegram_user(make_user, "1001"), "Call the bank", now=now)
    fake_telegram.plan.on_call(1, telegram.SERVER_ERROR)

    first = run_deliver(now)
    after_first = reload(row)
    assert (first.sent, first.retried) == (0, 1)
    assert after_first.outcome is None
    assert after_first.attempts == 1
    assert after_first.claimed_at is None
    assert after_first.last_error.startswith("[network]")
    assert after_first.not_before == now + timedelta(seconds=60)  # NUDGE_RETRY_DELAY_SECONDS

    second = run_deliver(now + timedelta(minutes=1))
    after_second = reload(row)
    assert second.sent == 1
    assert after_second.outcome == "sent"
    [delivered] = fake_telegram.delivered
    assert after_second.provider_message_id == delivered.message_id
    assert "Call the bank" in delivered.text


def test_whatsapp_server_error_is_retried_then_sent(channels, make_user, fake_twilio, now):
    row = queue_follow_up(whatsapp_user(make_user, "+15550001111"), "Dentist", now=now)
    fake_twilio.plan.on_call(1, twilio.SERVICE_UNAVAILABLE)

    run_deliver(now)
    assert (reload(row).outcome, reload(row).attempts) == (None, 1)
    run_deliver(now + timedelta(minutes=1))
    settled = reload(row)
    assert settled.outcome == "sent"
    assert settled.channel == "whatsapp"
    assert settled.provider_message_id == fake_twilio.delivered[0].message_id


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        (twilio.INVALID_TO, "21211"),
        (twilio.UNSUBSCRIBED, "21610"),
        (twilio.OUTSIDE_WINDOW, "63016"),
    ],
)
def test_whatsapp_permanent_error_settles_failed_with_the_code(
    channels, make_user, fake_twilio, now, fault, code
):
    row = queue_follow_up(whatsapp_user(make_user, "+15550002222"), "Gym", now=now)
    fake_twilio.plan.for_recipient("whatsapp:+15550002222", fault)

    report = run_deliver(now)
    settled = reload(row)
    assert report.failed == 1
    assert settled.outcome == "failed"
    assert settled.last_error.startswith(f"[{code}]")
    assert settled.sent_at is None
    # Never retried.
    run_deliver(now + timedelta(minutes=1))
    assert len(fake_twilio.sends()) == 1


@pytest.mark.parametrize(
    ("fault", "code"), [(telegram.CHAT_NOT_FOUND, "400"), (telegram.BOT_BLOCKED, "403")]
)
def test_telegram_permanent_error_settles_failed_with_the_code(
    channels, make_user, fake_telegram, now, fault, code
):
    row = queue_follow_up(telegram_user(make_user, "2002"), "Gym", now=now)
    fake_telegram.plan.for_recipient("2002", fault)

    run_deliver(now)
    settled = reload(row)
    assert settled.outcome == "failed"
    assert settled.last_error.startswith(f"[{code}]")


def test_telegram_flood_control_pauses_the_channel_and_the_run_resumes_after_it(
    channels, make_user, fake_telegram, now, settings
):
    settings.NUDGE_TELEGRAM_RATE = 2  # slots 0.5 s apart: the others wait when the 429 comes
    users = [telegram_user(make_user, str(3000 + i)) for i in range(3)]
    rows = [
        queue_follow_up(user, f"Task {i}", now=now, fired_ago=timedelta(seconds=50 - i))
        for i, user in enumerate(users)
    ]
    fake_telegram.plan.on_call(1, telegram.flood(1))  # Telegram's shortest retry_after

    report = run_deliver()  # the real clock: the pause passes within the run
    assert (report.sent, report.rate_limited) == (3, 1)
    assert sorted(d.recipient for d in fake_telegram.delivered) == ["3000", "3001", "3002"]
    limited, *others = (reload(row) for row in rows)
    assert limited.attempts == 1 and limited.last_error == ""
    # Nothing went to Telegram during the pause it asked for.
    flood_at = fake_telegram.sends()[0].at
    assert all(d.at >= flood_at + 1 for d in fake_telegram.delivered)
    assert all(row.outcome == "sent" for row in others)


def test_whatsapp_retry_after_is_honoured_and_other_channels_carry_on(
    channels, make_user, fake_twilio, fake_telegram, now, settings
):
    settings.NUDGE_WHATSAPP_RATE = 2  # the second number waits for its slot
    wa_rows = [
        queue_follow_up(whatsapp_user(make_user, f"+1555000{i:04d}"), f"WA {i}", now=now)
        for i in range(2)
    ]
    tg_row = queue_follow_up(telegram_user(make_user, "4004"), "TG", now=now)
    fake_twilio.plan.on_call(
        1, twilio.twilio_error(20429, "Too Many Requests", 429, retry_after="1")
    )

    report = run_deliver(now)  # a replay: rows handed back wait for a later run
    assert (report.sent, report.rate_limited) == (1, 1)  # Telegram was not paused
    assert reload(tg_row).outcome == "sent"
    assert len(fake_twilio.sends()) == 1  # the other number was not tried into the pause
    assert all(reload(row).outcome is None for row in wa_rows)
    assert max(reload(row).not_before for row in wa_rows) == now + timedelta(seconds=1)
    assert reload(wa_rows[0]).attempts + reload(wa_rows[1]).attempts == 1

    assert run_deliver(now + timedelta(milliseconds=500)).claimed == 0
    assert run_deliver(now + timedelta(seconds=2)).sent == 2
    assert len(fake_twilio.delivered) == 2


def test_the_three_channels_are_interchangeable(
    channels, make_user, fake_twilio, fake_telegram, now, capsys
):
    rows = [
        queue_follow_up(make_user(channel="console"), "Console", now=now),
        queue_follow_up(telegram_user(make_user, "5005"), "Telegram", now=now),
        queue_follow_up(whatsapp_user(make_user, "+15550005555"), "WhatsApp", now=now),
    ]
    report = run_deliver(now)
    assert report.sent == 3
    assert [reload(row).channel for row in rows] == ["console", "telegram", "whatsapp"]
    assert "Console" in capsys.readouterr().out
    assert len(fake_telegram.delivered) == len(fake_twilio.delivered) == 1


def test_markup_title_arrives_as_plain_text_at_both_providers(
    channels, make_user, fake_twilio, fake_telegram, now
):
    title = "*_[]()~`>#+-=|{}.!<b>&amp;"
    queue_follow_up(telegram_user(make_user, "6006"), title, now=now)
    queue_follow_up(whatsapp_user(make_user, "+15550006666"), title, now=now)

    assert run_deliver(now).sent == 2
    [tg] = fake_telegram.delivered
    [wa] = fake_twilio.delivered
    assert tg.text.startswith(f"Reminder: {title} is due at ")
    assert wa.params["Body"] == tg.text
    assert "parse_mode" not in tg.params
