"""What delivery does with the self-service rules: a channel the provider says
cannot reach the user is paused (not failed forever), and quiet hours skip
with a reason the user reads in their history. Real channels, fake providers."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from followups import actions as followups
from sweeps.deliver import run_deliver
from sweeps.replan import refresh_queue
from tenancy.scope import tenant_scope
from tests.fakes import telegram_server as tg
from tests.fakes import twilio_server as tw
from tests.support.queue import settle_one
from tests.support.timeline import describe

from .conftest import pending, queued

CHAT = "7000001"
NUMBER = "+4915112345678"


@pytest.fixture
def now():
    return timezone.now().replace(second=0, microsecond=0)


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


def two_follow_ups(user, now):
    followups.create_follow_up(
        user.pk, "Call the bank", now + timedelta(minutes=10), now, NudgeConfig.from_settings()
    )
    followups.create_follow_up(
        user.pk, "Book flights", now + timedelta(minutes=40), now, NudgeConfig.from_settings()
    )


@pytest.mark.parametrize(
    "channel,address,fault,reason",
    [
        ("telegram", CHAT, tg.BOT_BLOCKED, "you blocked the bot in Telegram"),
        (
            "telegram",
            CHAT,
            tg.telegram_error(403, "Forbidden: user is deactivated", name="deactivated"),
            "your Telegram account is deactivated",
        ),
        ("whatsapp", NUMBER, tw.UNSUBSCRIBED, "you replied STOP on WhatsApp"),
        (
            "whatsapp",
            NUMBER,
            tw.twilio_error(63024, "Invalid message recipient"),
            "cannot receive messages",
        ),
    ],
)
def test_an_unreachable_channel_pauses_instead_of_failing_every_nudge(
    twilio_settings,
    telegram_settings,
    fake_telegram,
    fake_twilio,
    make_user,
    now,
    channel,
    address,
    fault,
    reason,
):
    field = "telegram_chat_id" if channel == "telegram" else "whatsapp_number"
    user = make_user(channel=channel, **{field: address})
    fake = fake_telegram if channel == "telegram" else fake_twilio
    recipient = address if channel == "telegram" else f"whatsapp:{address}"
    fake.plan.for_recipient(recipient, fault)
    two_follow_ups(user, now)
    assert len(pending(user)) == 2

    report = run_deliver(now)
    assert report.failed == 1
    held = settings_of(user)
    assert held.unreachable_channel == channel
    assert reason in held.unreachable_reason
    # Delivery writes the flag only (no re-planning inside a run); later runs
    # do not try again, and the next materialize withdraws what is left.
    run_deliver(now + timedelta(minutes=30))
    assert len(fake.sends()) == 1
    refresh_queue(user.pk, now + timedelta(minutes=31))
    assert pending(user) == []


def test_a_permanent_error_that_is_not_about_the_person_changes_nothing(
    telegram_settings, fake_telegram, make_user, now
):
    user = make_user(channel="telegram", telegram_chat_id=CHAT)
    fake_telegram.plan.for_recipient(CHAT, tg.CHAT_NOT_FOUND, times=1)
    two_follow_ups(user, now)
    run_deliver(now)
    assert settings_of(user).unreachable_channel == ""
    assert len(pending(user)) == 1


def test_relinking_telegram_resumes_and_the_reason_is_shown_meanwhile(
    telegram_settings, fake_telegram, person, now, client
):
    from .test_telegram import link_code, post_update

    telegram_settings.TELEGRAM_BOT_USERNAME = "nudge_test_bot"
    telegram_settings.TELEGRAM_WEBHOOK_SECRET = "s3cret_Webhook-token_0123456789"
    user = person("ana")
    client.force_login(user)
    post_update(client, fake_telegram.push_message(int(CHAT), f"/start {link_code(client)}"))
    fake_telegram.plan.for_recipient(CHAT, tg.BOT_BLOCKED, times=1)
    two_follow_ups(user, now)
    run_deliver(now)
    home = client.get(reverse("portal:home")).content.decode()
    assert "cannot reach you (you blocked the bot in Telegram)" in home
    # The history says what happened to the nudge, in words (not the provider's "[403]").
    assert "The messaging service would not take it." in home and "[403]" not in home
    post_update(client, fake_telegram.push_message(int(CHAT), f"/start {link_code(client)}"))
    assert settings_of(user).unreachable_channel == ""
    [row] = pending(user)
    run_deliver(row.fire_at)
    assert [d.text for d in fake_telegram.delivered_to(CHAT)][-1].startswith(
        "Reminder: Book flights"
    )


def test_quiet_hours_skip_is_settled_with_a_reason_shown_in_history(
    recording_channel, make_user, now, client
):
    user = make_user(channel="console")
    fire = now + timedelta(minutes=5)
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            quiet_start=time(
                (fire - timedelta(minutes=30)).hour, (fire - timedelta(minutes=30)).minute
            ),
            quiet_end=time(
                (fire + timedelta(minutes=60)).hour, (fire + timedelta(minutes=60)).minute
            ),
        )
    followups.create_follow_up(
        user.pk, "Stretch", now + timedelta(minutes=15), now, NudgeConfig.from_settings()
    )
    [row] = pending(user)
    assert row.intended_at == fire
    report = run_deliver(fire)
    assert report.skipped == 1 and recording_channel.sent == []
    [settled] = queued(user)
    assert settled.outcome == "skipped" and settled.last_error.startswith("quiet hours until")
    user.set_password("pw-for-the-page-1")
    user.save()
    client.force_login(user)
    assert "It fell in your quiet hours." in client.get(reverse("portal:home")).content.decode()


def test_support_sees_why_a_users_nudges_are_held(
    telegram_settings, fake_telegram, make_user, now, client
):
    from django.contrib.auth import get_user_model

    user = make_user(channel="telegram", telegram_chat_id=CHAT)
    fake_telegram.plan.for_recipient(CHAT, tg.BOT_BLOCKED)
    two_follow_ups(user, now)
    run_deliver(now)
    staff = get_user_model().objects.create_user("support", is_staff=True, is_superuser=True)
    client.force_login(staff)
    page = client.get("/admin/accounts/deliverysettings/").content.decode()
    assert "telegram unreachable: you blocked the bot in Telegram" in page


def test_a_held_nudge_sent_a_little_early_by_smoothing_still_goes(make_user, now):
    """Quiet hours bind the intended instant: smoothing may move the send a few
    minutes earlier, into the quiet period's last minutes, without a skip."""
    import uuid

    from core.config import NudgeConfig
    from scheduled_sends.queue.transitions import ClaimedSend, Transition
    from scheduled_sends.subjects import read_facts
    from sweeps.verdicts import Delivery, decide

    user = make_user(channel="console")
    quiet_end = now + timedelta(minutes=55)  # the nudge is intended at +50: held to +55
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            quiet_start=time((now - timedelta(hours=1)).hour, (now - timedelta(hours=1)).minute),
            quiet_end=time(quiet_end.hour, quiet_end.minute),
        )
    follow_up = followups.create_follow_up(
        user.pk, "Stand-up", now + timedelta(hours=1), now, NudgeConfig.from_settings()
    )
    [row] = pending(user)
    assert row.intended_at == quiet_end
    claimed = ClaimedSend(
        id=row.pk,
        user_id=user.pk,
        kind=row.kind,
        ref_id=follow_up.pk,
        intended_at=row.intended_at,
        fire_at=quiet_end - timedelta(minutes=4),
        subject_starts_at=row.subject_starts_at,
        claim_token=uuid.uuid4(),
        attempts=0,
        send_started_at=None,
    )
    config = NudgeConfig.from_settings()
    facts = read_facts([claimed])[claimed.id]
    assert isinstance(decide(claimed, facts, quiet_end - timedelta(minutes=4), config), Delivery)
    # A row whose intended instant is inside quiet hours (settings changed since) is skipped.
    inside = ClaimedSend(**{**claimed.__dict__, "intended_at": now + timedelta(minutes=5)})
    skipped = decide(inside, facts, now + timedelta(minutes=5), config)
    assert skipped.transition is Transition.SKIPPED
    assert skipped.reason.startswith("quiet hours: moved to")


def test_history_words_a_failure_from_its_kind(make_user, now):
    """The user's history reads the row's failure kind when no words were recorded."""
    from core.config import NudgeConfig
    from portal import timeline
    from scheduled_sends.failures import FailureKind
    from scheduled_sends.queue import transitions

    user = make_user(channel="console")
    with tenant_scope(user.pk):
        transitions.enqueue(
            user.pk, "console", [transitions.NewNudge("follow_up", 999_999, now, now, 0)]
        )
    [claimed] = transitions.claim_due(now, NudgeConfig.from_settings())
    assert settle_one(
        claimed, transitions.Transition.FAILED, now, failure_kind=FailureKind.INTERRUPTED
    )
    with tenant_scope(user.pk):
        [entry] = timeline.history(user.pk, now + timedelta(minutes=1))
    assert describe(entry) == (
        "failed: It may have arrived; it was not sent again, so you do not get it twice."
    )
