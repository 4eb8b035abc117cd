"""The delivery sweep: once, on time, to the right person — or a clear reason why not;
through the real channels, each provider answer settled as the channel interface says."""

from __future__ import annotations

import re
from collections import deque
from datetime import timedelta
from typing import ClassVar

import pytest
from django.core.management import call_command
from django.utils import timezone

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from messaging.channels.base import (
    NudgeMessage,
    PermanentSendError,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
)
from messaging.messages import compose
from scheduled_sends.failures import INTERRUPTED_REASON, FailureKind
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tenancy.scope import tenant_scope
from tests.channels.queue import queue_follow_up, reload
from tests.conftest import utc
from tests.fakes import telegram_server as telegram
from tests.fakes import twilio_server as twilio
from tests.support.queue import settle_one
from tests.support.recording import RecordingChannel
from tests.sweeps.factories import add_event, add_follow_up, rows, update

NOW = utc(2026, 12, 2, 14, 0)
FIRE = NOW + timedelta(minutes=50)  # an event at 15:00 with the default 10-minute lead


class ScriptedChannel(RecordingChannel):
    """Records like RecordingChannel, but first raises what the script says."""

    script: ClassVar[dict[str, deque[Exception]]] = {}

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        queued = self.script.get(address)
        if queued:
            raise queued.popleft()
        return super().send(address, message)


@pytest.fixture
def scripted(settings, recording_channel):
    path = f"{__name__}.ScriptedChannel"
    settings.NUDGE_CHANNEL_BACKENDS = {"console": path, "telegram": path, "whatsapp": path}
    ScriptedChannel.script = {}
    return ScriptedChannel


@pytest.fixture
def due_event(make_user):
    user = make_user("dana", timezone="Europe/Berlin")
    event = add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    return user, event


def only_row(user):
    [row] = rows(user)
    return row


def test_a_due_nudge_is_sent_once_in_the_users_time_zone(due_event, recording_channel):
    user, _ = due_event
    report = run_deliver(FIRE)
    assert (report.claimed, report.sent) == (1, 1)
    [message] = recording_channel.sent
    assert message.text == "Design review starts at 16:00 (in 10 min)"  # Berlin is UTC+1
    row = only_row(user)
    assert (row.outcome, row.sent_at, row.provider_message_id) == (
        "sent",
        FIRE,
        message.provider_message_id,
    )
    assert run_deliver(FIRE + timedelta(minutes=1)).claimed == 0
    assert len(recording_channel.sent) == 1


def test_nothing_is_sent_before_its_fire_time(due_event, recording_channel):
    assert run_deliver(FIRE - timedelta(seconds=1)).claimed == 0
    assert recording_channel.sent == []


def test_a_nudge_after_a_dst_change_fires_at_the_right_instant(make_user, recording_channel):
    """Berlin springs forward at 02:00 local on 2026-03-29; 03:30 local is 01:30Z."""
    user = make_user(timezone="Europe/Berlin")
    starts = utc(2026, 3, 29, 1, 30)
    add_event(user, starts, title="Early train")
    run_materialize(utc(2026, 3, 29, 0, 0))
    assert only_row(user).fire_at == utc(2026, 3, 29, 1, 20)
    run_deliver(utc(2026, 3, 29, 1, 20))
    assert [m.text for m in recording_channel.sent] == ["Early train starts at 03:30 (in 10 min)"]


def test_a_follow_up_reads_as_a_reminder(make_user, recording_channel):
    user = make_user()
    add_follow_up(user, NOW + timedelta(hours=1), title="Send the proposal")
    run_materialize(NOW)
    run_deliver(FIRE)
    assert [m.text for m in recording_channel.sent] == [
        "Reminder: Send the proposal is due at 15:00 (in 10 min)"
    ]


def test_a_nudge_for_another_day_names_the_day(make_user, recording_channel):
    """An evening reminder for tomorrow morning's meeting: "at 09:00" alone would
    read as today, so the message says "tomorrow" (issue 22, item 5)."""
    user = make_user(timezone="Europe/Berlin")
    add_event(user, utc(2026, 12, 3, 8, 0), title="Standup", reminder_minutes=[12 * 60])
    run_materialize(utc(2026, 12, 2, 19, 0))
    run_deliver(utc(2026, 12, 2, 20, 0))
    [message] = recording_channel.sent
    assert message.text == "Standup starts tomorrow at 09:00 (in 12 h)"


@pytest.mark.parametrize(
    ("tz_name", "now", "starts_at", "local_time", "when"),
    [
        # 23:50 on Wednesday in Berlin; the start is Thursday there, Wednesday in UTC.
        (
            "Europe/Berlin",
            utc(2026, 12, 2, 22, 50),
            utc(2026, 12, 2, 23, 0),
            "tomorrow 00:00",
            "tomorrow at 00:00",
        ),
        # 18:50 on Wednesday in New York; the start is Wednesday there, Thursday in UTC.
        (
            "America/New_York",
            utc(2026, 12, 2, 23, 50),
            utc(2026, 12, 3, 0, 10),
            "19:10",
            "at 19:10",
        ),
    ],
)
def test_the_day_is_named_by_the_users_calendar_not_utcs(tz_name, now, starts_at, local_time, when):
    message = compose(
        kind="event",
        title="Late call",
        starts_at=starts_at,
        now=now,
        tz_name=tz_name,
        valid_until=starts_at,
    )
    assert message.local_time == local_time
    assert message.text.startswith(f"Late call starts {when} (in ")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"status": "cancelled"}, "event cancelled"),
        ({"declined": True}, "event declined"),
        ({"starts_at": NOW + timedelta(hours=3)}, "subject moved"),
    ],
)
def test_nothing_worth_saying_is_settled_skipped(due_event, recording_channel, change, reason):
    user, event = due_event
    update(user, event, **change)
    report = run_deliver(FIRE)
    assert report.skipped == 1
    row = only_row(user)
    assert row.outcome == "skipped" and row.sent_at == FIRE and reason in row.last_error
    assert recording_channel.sent == []


def test_a_user_who_turned_nudges_off_is_skipped(due_event, recording_channel):
    user, _ = due_event
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user=user).update(enabled=False)
    run_deliver(FIRE)
    assert only_row(user).outcome == "skipped"
    assert recording_channel.sent == []


def test_a_transient_failure_is_retried_the_next_minute(due_event, scripted):
    user, _ = due_event
    scripted.script[f"user:{user.pk}"] = deque([TransientSendError("timed out", code="timeout")])
    report = run_deliver(FIRE)
    assert (report.retried, report.sent) == (1, 0)
    row = only_row(user)
    assert row.outcome is None and row.sent_at is None and row.claimed_at is None
    assert (row.attempts, row.last_error) == (1, "[timeout] timed out")
    report = run_deliver(FIRE + timedelta(minutes=1))
    assert report.sent == 1
    assert only_row(user).outcome == "sent"
    assert len(scripted.sent) == 1


def test_a_permanent_failure_is_never_retried(due_event, scripted):
    user, _ = due_event
    scripted.script[f"user:{user.pk}"] = deque(
        [PermanentSendError("chat not found", code="400"), None]
    )
    run_deliver(FIRE)
    row = only_row(user)
    assert (row.outcome, row.sent_at, row.last_error) == ("failed", None, "[400] chat not found")
    assert row.failure_kind == FailureKind.REFUSED
    assert run_deliver(FIRE + timedelta(minutes=1)).claimed == 0
    assert scripted.sent == []


def test_an_unconfirmed_send_is_not_resent(due_event, scripted):
    """A read timeout: the provider may have delivered it; a retry could say it twice."""
    user, _ = due_event
    scripted.script[f"user:{user.pk}"] = deque(
        [UnconfirmedSendError("no answer within 10s", code="timeout")]
    )
    report = run_deliver(FIRE)
    assert (report.failed, report.retried) == (1, 0)
    row = only_row(user)
    assert row.outcome == "failed" and "may have been delivered; not resent" in row.last_error
    assert row.failure_kind == FailureKind.UNCONFIRMED
    assert run_deliver(FIRE + timedelta(minutes=1)).claimed == 0


def test_a_row_past_grace_is_expired_and_never_sent(due_event, recording_channel, settings):
    settings.NUDGE_GRACE_MINUTES = 15
    user, _ = due_event
    report = run_deliver(FIRE + timedelta(minutes=15))
    assert (report.claimed, report.expired) == (0, 1)
    row = only_row(user)
    assert (row.outcome, row.sent_at) == ("expired", None)
    assert recording_channel.sent == []


def test_a_run_killed_after_claiming_is_reclaimed_only_after_the_lease(
    due_event, recording_channel, settings
):
    user, _ = due_event
    settings.NUDGE_LEASE_SECONDS = 300
    config = NudgeConfig.from_settings()
    [claimed] = transitions.claim_due(FIRE, config)  # the run dies here: no settle-up
    assert run_deliver(FIRE + timedelta(minutes=1)).claimed == 0
    assert run_deliver(FIRE + timedelta(seconds=299)).claimed == 0
    report = run_deliver(FIRE + timedelta(seconds=301))
    assert (report.claimed, report.sent) == (1, 1)
    assert len(recording_channel.sent) == 1
    # The dead run's late settle-up is fenced off by the newer claim's token.
    assert settle_one(claimed, transitions.Transition.FAILED, FIRE, reason="late") is False
    assert only_row(user).outcome == "sent"


def test_a_run_that_died_mid_send_is_not_sent_again(due_event, recording_channel):
    user, _ = due_event
    config = NudgeConfig.from_settings()
    [claimed] = transitions.claim_due(FIRE, config)
    assert settle_one(claimed, transitions.Transition.MARK_SENDING, FIRE, channel="console")
    # … then the process is killed
    report = run_deliver(FIRE + config.lease + timedelta(seconds=1))
    assert (report.claimed, report.failed, report.sent) == (1, 1, 0)
    row = only_row(user)
    assert (row.last_error, row.failure_kind) == (INTERRUPTED_REASON, FailureKind.INTERRUPTED)
    assert recording_channel.sent == []


def test_a_claim_never_returns_more_than_its_batch(make_user):
    user = make_user()
    for minute in range(30):
        add_follow_up(user, NOW + timedelta(minutes=20 + minute))
    run_materialize(NOW)
    config = NudgeConfig.from_settings()
    at = NOW + timedelta(minutes=40)  # 14 rows fired within the last 15 minutes
    first = transitions.claim_due(at, config, limit=7)
    second = transitions.claim_due(at, config, limit=7)
    assert len(first) == len(second) == 7
    assert transitions.claim_due(at, config, limit=7) == []
    assert not {r.id for r in first} & {r.id for r in second}
    # Oldest first.
    assert max(r.fire_at for r in first) <= min(r.fire_at for r in second)


def test_a_run_works_through_batches_until_nothing_is_due(make_user, recording_channel):
    user = make_user(default_lead_minutes=30)
    for minute in range(12):
        add_follow_up(user, NOW + timedelta(minutes=40 + minute))
    run_materialize(NOW)
    report = run_deliver(NOW + timedelta(minutes=21), batch_size=5)
    assert (report.batches, report.claimed, report.sent) == (3, 12, 12)


def test_a_spent_budget_hands_claimed_rows_back_untried(make_user, recording_channel, settings):
    """Rows a run claimed but had no time to send go back to the queue untried, and
    the next run sends each of them once.

    The channel carries one message every two seconds and the run has half a
    second, so of five rows claimed together at most the first can leave; the
    rest are still waiting for a send slot when the budget is spent. Kept
    claimed, they would sit out the lease — five minutes late or expired.
    """
    users = [make_user() for _ in range(5)]
    for user in users:
        add_follow_up(user, NOW + timedelta(hours=1))
    run_materialize(NOW)

    settings.NUDGE_CONSOLE_RATE = 0.5
    report = run_deliver(FIRE, budget_seconds=0.5)
    assert report.claimed == 5
    assert report.sent <= 1, "only the first send slot opens within the budget; it must stop there"
    assert report.released == report.claimed - report.sent
    handed_back = [row for user in users for row in rows(user) if row.outcome is None]
    assert len(handed_back) == report.released
    for row in handed_back:
        assert (row.claimed_at, row.claim_token, row.send_started_at, row.attempts) == (
            None,
            None,
            None,
            0,
        ), f"row {row.id} was not handed back untried"

    settings.NUDGE_CONSOLE_RATE = 0.0
    next_run = run_deliver(FIRE + timedelta(minutes=1))
    assert (next_run.claimed, next_run.sent) == (report.released, report.released)
    assert sorted(m.address for m in recording_channel.sent) == sorted(
        f"user:{user.pk}" for user in users
    ), "every nudge is sent exactly once across the two runs"


def test_a_missing_address_fails_visibly(make_user, recording_channel):
    user = make_user(channel="telegram", telegram_chat_id="")
    add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    run_deliver(FIRE)
    row = only_row(user)
    assert row.outcome == "failed"
    assert "no address configured for the telegram channel" in row.last_error
    assert row.failure_kind == FailureKind.NO_ADDRESS


def test_our_own_configuration_and_an_unreadable_acceptance_fail_with_their_kinds(
    make_user, scripted
):
    """The channel knows whose problem it is; the row carries that, not just words."""
    config_user, odd_user = make_user(), make_user()
    for user in (config_user, odd_user):
        add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    scripted.script[f"user:{config_user.pk}"] = deque(
        [PermanentSendError("token empty", code="config", kind=FailureKind.CONFIGURATION)]
    )
    scripted.script[f"user:{odd_user.pk}"] = deque(
        [
            PermanentSendError(
                "answer unreadable", code="protocol", kind=FailureKind.UNUSABLE_RECEIPT
            )
        ]
    )
    report = run_deliver(FIRE)
    assert report.failed == 2
    assert only_row(config_user).failure_kind == FailureKind.CONFIGURATION
    assert only_row(odd_user).failure_kind == FailureKind.UNUSABLE_RECEIPT
    assert only_row(odd_user).last_error == "[protocol] answer unreadable"


def test_sent_skipped_and_retried_rows_carry_no_failure_kind(make_user, scripted):
    user = make_user()
    add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    scripted.script[f"user:{user.pk}"] = deque([TransientSendError("down", code="500")])
    run_deliver(FIRE)
    assert (only_row(user).outcome, only_row(user).failure_kind) == (None, "")
    run_deliver(FIRE + timedelta(minutes=2))
    assert (only_row(user).outcome, only_row(user).failure_kind) == ("sent", "")


def test_the_command_prints_the_summary_and_exits_zero(due_event, recording_channel, capsys):
    call_command("deliver", "--now", FIRE.isoformat())
    assert "deliver: claimed 1, sent 1, skipped 0, retry 0, failed 0, expired 0 in " in (
        capsys.readouterr().out
    )
    assert SweepRun.objects.get(sweep="deliver").counts["sent"] == 1


# --- Provider answers, end to end: the real channels against the fake servers ---
# Each answer settles the row the way the channel interface promises: transient →
# retried on the next run; permanent → failed with the provider's code, never
# retried; rate limited → not sent again before ``retry_after``, the channel
# paused for that long, and the run carries on with the others.

TELEGRAM_500 = "[network] Telegram unreachable: Internal Server Error"


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
    assert after_first.outcome is None and after_first.sent_at is None
    assert after_first.attempts == 1
    assert after_first.claimed_at is None
    assert after_first.last_error == TELEGRAM_500
    assert after_first.not_before == now + timedelta(seconds=60)  # NUDGE_RETRY_DELAY_SECONDS

    second = run_deliver(now + timedelta(minutes=1))
    after_second = reload(row)
    assert second.sent == 1
    assert after_second.outcome == "sent"
    [delivered] = fake_telegram.delivered  # sent once
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
    ("fault", "code", "description"),
    [
        (telegram.CHAT_NOT_FOUND, "400", "Telegram bad request: Chat not found"),
        (telegram.BOT_BLOCKED, "403", "Telegram refused: Forbidden: bot was blocked by the user"),
    ],
)
def test_telegram_permanent_error_settles_failed_with_the_code(
    channels, make_user, fake_telegram, now, fault, code, description
):
    row = queue_follow_up(telegram_user(make_user, "2002"), "Gym", now=now)
    fake_telegram.plan.for_recipient("2002", fault)

    run_deliver(now)
    settled = reload(row)
    assert (settled.outcome, settled.sent_at) == ("failed", None)
    assert settled.last_error == f"[{code}] {description}"
    # Never retried, never delivered.
    assert run_deliver(now + timedelta(minutes=1)).claimed == 0
    assert len(fake_telegram.sends()) == 1
    assert fake_telegram.delivered == []


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
    # A pause long enough that the run ends inside it however loaded the machine: the
    # pause runs on the real clock, the replay's instants are simulated.
    fake_twilio.plan.on_call(
        1, twilio.twilio_error(20429, "Too Many Requests", 429, retry_after="4")
    )

    report = run_deliver(now)  # a replay: rows handed back wait for a later run
    assert (report.sent, report.rate_limited, report.retried) == (1, 1, 1)  # Telegram not paused
    assert reload(tg_row).outcome == "sent"
    assert len(fake_twilio.sends()) == 1  # the other number was not tried into the pause
    assert all(reload(row).outcome is None for row in wa_rows)
    assert max(reload(row).not_before for row in wa_rows) >= now + timedelta(seconds=4)
    assert reload(wa_rows[0]).attempts + reload(wa_rows[1]).attempts == 1

    assert run_deliver(now + timedelta(seconds=2)).claimed == 0
    assert run_deliver(now + timedelta(seconds=10)).sent == 2
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
    # "tomorrow at" when the run is minutes before midnight.
    assert re.match(rf"Reminder: {re.escape(title)} is due (tomorrow )?at ", tg.text), tg.text
    assert wa.params["Body"] == tg.text
    assert "parse_mode" not in tg.params
