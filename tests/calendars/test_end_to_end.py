"""ICS feed on 127.0.0.1 → materialize (which syncs) → deliver: one message, 30 minutes before.

A weekly meeting carries a 30-minute VALARM, as Google exports it. The sweeps
run every 15 minutes (materialize) and every minute (deliver) around it; the
message arrives exactly once, at 08:30 for the 09:00 meeting, and the feed is
fetched once per materialize run (a 304 after the first).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from calendars.connect import connect_ics_feed
from core.config import NudgeConfig
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.calendars.ics_samples import crlf

START = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
MEETING = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

WEEKLY = crlf(
    """
BEGIN:VCALENDAR
PRODID:-//Google Inc//Google Calendar 70.9054//EN
VERSION:2.0
X-WR-CALNAME:Work
X-WR-TIMEZONE:Europe/Berlin
BEGIN:VEVENT
UID:weekly-sync@google.com
DTSTART:20261118T090000Z
DTEND:20261118T093000Z
RRULE:FREQ=WEEKLY;BYDAY=WE
SUMMARY:Weekly sync
BEGIN:VALARM
ACTION:DISPLAY
DESCRIPTION:This is an event reminder
TRIGGER:-P0DT0H30M0S
END:VALARM
END:VEVENT
END:VCALENDAR
"""
)


def run_the_morning(fake_ics, until: datetime) -> list[datetime]:
    """Materialize every 15 minutes and deliver every minute; when did sends happen?"""
    moment, sent_at = START, []
    while moment <= until:
        if moment.minute % 15 == 0:
            report = run_materialize(moment)
            assert report.calendars_failed == 0
        delivered = run_deliver(moment)
        if delivered.sent:
            sent_at.extend([moment] * delivered.sent)
        moment += timedelta(minutes=1)
    return sent_at


def connect_feed(user, fake_ics, now=START):
    """Connect the fake feed as the command line does (fetched at once)."""
    return connect_ics_feed(
        user.pk, fake_ics.feed_url, allow_private=True, now=now, config=NudgeConfig.from_settings()
    )


def test_weekly_meeting_nudged_once_thirty_minutes_before_via_telegram(
    make_user, fake_ics, fake_telegram, telegram_settings
):
    fake_ics.body = WEEKLY
    user = make_user(channel="telegram", telegram_chat_id="1001", default_lead_minutes=10)
    connect_feed(user, fake_ics)

    sent_at = run_the_morning(fake_ics, until=MEETING + timedelta(minutes=5))

    assert sent_at == [MEETING - timedelta(minutes=30)]
    [message] = fake_telegram.delivered
    assert message.recipient == "1001" and "Weekly sync" in message.text
    # One fetch at connect, then one per materialize run (9 runs from 07:00 to 09:00), 304s.
    assert len(fake_ics.feed_calls()) == 1 + 9
    assert fake_ics.full_responses == 1


def test_weekly_meeting_nudged_once_via_the_recording_channel(
    make_user, fake_ics, recording_channel
):
    fake_ics.body = WEEKLY
    user = make_user(channel="console")
    connect_feed(user, fake_ics)

    sent_at = run_the_morning(fake_ics, until=MEETING + timedelta(minutes=5))

    assert sent_at == [MEETING - timedelta(minutes=30)]
    assert len(recording_channel.sent) == 1 and "Weekly sync" in recording_channel.sent[0].text


def queue_as_seen_by(user_id: int) -> list[tuple[datetime, datetime, str]]:
    """The user's queue as (intended instant, subject start, title): comparable across users."""
    from calendars.models import CalendarEvent
    from scheduled_sends.models import ScheduledSend
    from tenancy.scope import tenant_scope

    with tenant_scope(user_id):
        titles = dict(CalendarEvent.objects.values_list("pk", "title"))
        return sorted(
            (row.intended_at, row.subject_starts_at, titles[row.ref_id])
            for row in ScheduledSend.objects.filter(user_id=user_id)
        )


def test_a_replay_queues_what_a_live_run_at_that_instant_queued(make_user, fake_ics):
    """``materialize --now T`` after the feed was connected later than T (at the real
    clock, say): before, the stored expansion began after T, the feed answered 304,
    and the replay queued nothing for the 09:00 meeting."""
    fake_ics.body = WEEKLY
    live, replayed = make_user(), make_user()
    connect_feed(live, fake_ics)
    connect_feed(replayed, fake_ics, START + timedelta(hours=10))

    run_materialize(START, user_ids=[live.pk])
    run_materialize(START, user_ids=[replayed.pk])

    expected = [(MEETING - timedelta(minutes=30), MEETING, "Weekly sync")]
    assert queue_as_seen_by(live.pk) == expected
    assert queue_as_seen_by(replayed.pk) == expected


def test_an_at_the_time_of_event_reminder_arrives_at_the_start(
    make_user, fake_ics, recording_channel
):
    """``TRIGGER:PT0S`` (Apple's and Outlook's "at time of event") is lead 0, queued by
    the calendar side and sent when the meeting starts."""
    fake_ics.body = WEEKLY.replace(b"TRIGGER:-P0DT0H30M0S", b"TRIGGER:PT0S")
    user = make_user(channel="console")
    connect_feed(user, fake_ics)

    sent_at = run_the_morning(fake_ics, until=MEETING + timedelta(minutes=5))

    assert sent_at == [MEETING]
    assert len(recording_channel.sent) == 1 and "Weekly sync" in recording_channel.sent[0].text
