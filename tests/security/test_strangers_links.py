"""issue 34 finding 4 (strangers' links reach the bot's message): an invitation's title
and location, written by anyone, were relayed as the nudge's text, and Telegram and
WhatsApp turn URLs and bare domains in text into links. In an event's words every
address is defanged now ("evil[.]example/login"); the allowed join link stays a link;
a follow-up, which the person wrote, keeps its text."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from messaging.messages import MAX_TITLE_CHARS, compose, neutralise_links
from scheduled_sends.models import Kind
from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up
from tests.support.queue import queue_nudge
from tests.sweeps.factories import add_event

PHISHING_TITLE = "Payroll: confirm your bank details at https://evil.example/login"
PHISHING_PLACE = "Dial in: zoom-us.evil.example/j/123 or bit.ly/x9"
MEET = "https://meet.google.com/abc-defg-hij"
# What an app would make a link of, in any of the defanged text's spellings.
LINKISH = ("http", "://", "evil.example", "bit.ly", "zoom-us.evil", "www.")
FULL_WIDTH = "".join(chr(ord(char) + 0xFEE0) for char in "evil.example")


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


@pytest.fixture
def channels(twilio_settings, telegram_settings):
    return twilio_settings


def queue_event(user, now, **fields):
    """An event from an invitation, starting in ten minutes, its nudge due now."""
    event = add_event(user, now + timedelta(minutes=10), **fields)
    return queue_nudge(
        user.pk,
        kind=Kind.EVENT,
        ref_id=event.pk,
        at=now - timedelta(seconds=30),
        subject_starts_at=event.starts_at,
    )


def assert_no_link(text: str) -> None:
    for form in LINKISH:
        assert form not in text, f"{form!r} in {text!r}"


def test_a_phishing_url_in_an_invitation_reaches_neither_channel_as_a_link(
    channels, make_user, fake_telegram, fake_twilio, now
):
    """issue 34 finding 4: sent through the real Telegram and WhatsApp senders to the
    fake servers, the invitation's title and place arrive with no address an app would
    turn into a link — readable, defanged."""
    telegram = make_user(channel="telegram", telegram_chat_id="7007")
    whatsapp = make_user(channel="whatsapp", whatsapp_number="+15550007777")
    for user in (telegram, whatsapp):
        queue_event(user, now, title=PHISHING_TITLE, location=PHISHING_PLACE)

    assert run_deliver(now).sent == 2
    [tg] = fake_telegram.delivered
    [wa] = fake_twilio.delivered
    body = wa.params["Body"]
    for text in (tg.text, body):
        assert_no_link(text)
        first, second = text.split("\n")
        # "starts tomorrow at" when the run is minutes before midnight.
        assert re.match(
            r"Payroll: confirm your bank details at evil\[\.\]example/login starts "
            r"(tomorrow )?at ",
            first,
        ), first
        assert second == "Dial in: zoom-us[.]evil[.]example/j/123 or bit[.]ly/x9"
    markup = json.loads(tg.params["reply_markup"])
    assert all("url" not in button for row in markup["inline_keyboard"] for button in row)


def test_the_whatsapp_templates_title_is_defanged_too(
    channels, make_user, fake_twilio, now, settings
):
    """issue 34 finding 4: with a Content template the title travels as ``{{1}}``."""
    settings.TWILIO_CONTENT_SID = "HX" + "b" * 32
    user = make_user(channel="whatsapp", whatsapp_number="+15550008888")
    queue_event(user, now, title=PHISHING_TITLE)
    assert run_deliver(now).sent == 1
    [wa] = fake_twilio.delivered
    variables = json.loads(wa.params["ContentVariables"])
    assert variables["1"] == "Payroll: confirm your bank details at evil[.]example/login"
    assert "Body" not in wa.params


def test_the_allowed_join_link_stays_a_link_beside_a_defanged_title(
    channels, make_user, fake_telegram, fake_twilio, now
):
    """issue 34 finding 4: the join link (https, an allowed meeting host, checked at
    sync) is the one link an event's nudge carries: Telegram's Join button and the
    message's second line, as before."""
    telegram = make_user(channel="telegram", telegram_chat_id="7008")
    whatsapp = make_user(channel="whatsapp", whatsapp_number="+15550007778")
    for user in (telegram, whatsapp):
        queue_event(user, now, title=PHISHING_PLACE, location=PHISHING_TITLE, join_url=MEET)

    assert run_deliver(now).sent == 2
    [tg] = fake_telegram.delivered
    [wa] = fake_twilio.delivered
    for text in (tg.text, wa.params["Body"]):
        first, second = text.split("\n")
        assert_no_link(first)
        assert first.startswith("Dial in: zoom-us[.]evil[.]example/j/123 or bit[.]ly/x9 ")
        assert second == MEET
    markup = json.loads(tg.params["reply_markup"])
    urls = [button["url"] for row in markup["inline_keyboard"] for button in row if "url" in button]
    assert urls == [MEET]


def test_a_follow_ups_own_url_is_kept(channels, make_user, fake_telegram, fake_twilio, now):
    """issue 34 finding 4: a follow-up is the person's own words: its link stays."""
    title = "Pay the rent at https://bank.example/pay (or bit.ly/rent)"
    queue_follow_up(make_user(channel="telegram", telegram_chat_id="7009"), title, now=now)
    queue_follow_up(make_user(channel="whatsapp", whatsapp_number="+15550007779"), title, now=now)
    assert run_deliver(now).sent == 2
    [tg] = fake_telegram.delivered
    [wa] = fake_twilio.delivered
    assert re.match(rf"Reminder: {re.escape(title)} is due (tomorrow )?at ", tg.text), tg.text
    assert wa.params["Body"] == tg.text


@pytest.mark.parametrize(
    ("stranger", "shown"),
    [
        ("https://evil.example/login", "evil[.]example/login"),
        ("HTTP://Evil.Example", "Evil[.]Example"),
        ("www.evil.example", "www[.]evil[.]example"),
        ("write to pay@evil.example", "write to pay@evil[.]example"),
        ("tg://resolve?domain=evilbot", "resolve?domain=evilbot"),
        ("join t.me/evilbot", "join t[.]me/evilbot"),
        ("http://192.168.0.1/admin", "192[.]168[.]0[.]1/admin"),
        ("пример.рф/вход", "пример[.]рф/вход"),  # an internationalised name
        ("xn--80ak6aa92e.xn--p1ai", "xn--80ak6aa92e[.]xn--p1ai"),  # the same, as IDNA
        ("evil\u3002example", "evil[.]example"),  # an ideographic full stop
        (FULL_WIDTH, FULL_WIDTH.replace("\uff0e", "[.]")),  # full-width letters and dot
        ("evil.\u200bexample", "evil[.]example"),  # a zero-width space after the dot
        ("evil\u00ad.example", "evil[.]example"),  # a soft hyphen before it
        # Left alone: numbers, one-letter abbreviations, a name running into a digit.
        ("Room 4.2, v1.2.3 at 10.30", "Room 4.2, v1.2.3 at 10.30"),
        ("e.g. the Q&A, i.e. a.m.", "e.g. the Q&A, i.e. a.m."),
    ],
)
def test_addresses_in_a_strangers_text_are_defanged(stranger, shown):
    """issue 34 finding 4: the forms chat apps link, and what is left as written."""
    assert neutralise_links(stranger) == shown


def nudge(**fields):
    at = timezone.now()
    return compose(
        starts_at=at + timedelta(minutes=10),
        now=at,
        tz_name="UTC",
        valid_until=at + timedelta(minutes=25),
        **fields,
    )


def test_a_removed_override_cannot_join_an_address_back_together():
    """issue 34 finding 4: the characters the composer drops (bidi overrides) go before
    the addresses are looked for, so "evil.<RLO>example" cannot become a link after."""
    message = nudge(kind="event", title="evil.\u202eexample/login", location="bit\u202e.ly/x")
    assert message.title == "evil[.]example/login"
    assert message.text.splitlines()[1] == "bit[.]ly/x"  # the place, below the first line


def test_a_cut_title_keeps_no_address_and_a_huge_one_is_cheap():
    """issue 34 finding 4: defanged before the cut, so a cut cannot leave an address;
    only what the cut can keep is scanned."""
    title = "Update " + "evil.example/" * 2000
    message = nudge(kind="event", title=title)
    assert len(message.title) <= MAX_TITLE_CHARS
    assert_no_link(message.text)
