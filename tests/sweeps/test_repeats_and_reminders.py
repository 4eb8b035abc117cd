"""Issue 24, "what users of reminder tools expect": repeating follow-ups, a lead per
follow-up, several reminders per item, and a calendar's on/off and all-day switches,
all planned by materialize, held to its caps, and settled by delivery."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection
from followups.repeat import Repeat, is_occurrence, occurrences
from portal.calendar_links import set_switches
from scheduled_sends.models import Kind, NudgeAct
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tenancy.scope import tenant_scope
from tests.conftest import utc
from tests.sweeps.factories import add_event, add_follow_up, rows, update

BERLIN = ZoneInfo("Europe/Berlin")
NOW = utc(2026, 12, 2, 12, 0)


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN)


def test_every_weekday_at_9_queues_the_next_occurrence_inside_the_window_across_dst(
    make_user, settings, recording_channel
):
    """Recurring follow-ups: "every weekday 9:00" (Europe/Berlin) is nudged at 8:50 local
    on the Friday before the clocks go back (07:50Z) and on the Monday after (07:50Z is
    8:50 CET too: 06:50Z would be an hour early), nothing on the weekend; each occurrence
    is its own row, and delivery sends it."""
    settings.NUDGE_LOOKAHEAD_MINUTES = 180
    user = make_user(default_lead_minutes=10)
    daily = add_follow_up(user, berlin(2026, 10, 23, 9, 0), title="Stand-up notes")
    update(user, daily, repeat=Repeat.WEEKDAYS, repeat_zone="Europe/Berlin")

    friday = utc(2026, 10, 23, 5, 0)  # 07:00 CEST: 9:00 is inside the three hours
    assert run_materialize(friday).queued == 1
    assert [(r.fire_at, r.subject_starts_at) for r in rows(user)] == [
        (utc(2026, 10, 23, 6, 50), utc(2026, 10, 23, 7, 0))
    ]
    assert run_deliver(utc(2026, 10, 23, 6, 50)).sent == 1

    saturday = utc(2026, 10, 24, 5, 0)
    assert run_materialize(saturday).queued == 0
    # Sunday 03:00 CEST became 02:00 CET; Monday 9:00 CET is 08:00Z.
    monday = utc(2026, 10, 26, 6, 0)
    assert run_materialize(monday).queued == 1
    assert [r.subject_starts_at for r in rows(user)][-1] == utc(2026, 10, 26, 8, 0)
    assert rows(user)[-1].fire_at == utc(2026, 10, 26, 7, 50)
    assert run_deliver(utc(2026, 10, 26, 7, 50)).sent == 1
    assert len(recording_channel.sent) == 2


def test_weekly_and_daily_rules_keep_the_local_time_and_a_skipped_time_comes_later():
    """Recurring follow-ups: weekly on Mon and Thu; a 02:30 daily across the spring-forward
    night (02:30 does not exist) comes at 03:30 local, the gap later."""
    first = berlin(2026, 3, 2, 18, 0)  # a Monday
    weekly = list(
        occurrences(first, Repeat.WEEKLY, [0, 3], "Europe/Berlin", first, first + timedelta(14))
    )
    assert [o.astimezone(BERLIN).strftime("%a %d %H:%M") for o in weekly] == [
        "Thu 05 18:00",
        "Mon 09 18:00",
        "Thu 12 18:00",
        "Mon 16 18:00",
    ]
    night = berlin(2026, 3, 28, 2, 30)
    found = list(
        occurrences(night, Repeat.DAILY, [], "Europe/Berlin", night, night + timedelta(days=2))
    )
    assert [o.astimezone(BERLIN).strftime("%d %H:%M") for o in found] == ["29 03:30", "30 02:30"]


def test_monthly_on_the_31st_skips_the_months_without_one():
    """Recurring follow-ups, monthly on a day: the rule chosen is RFC 5545's BYMONTHDAY,
    so the 31st skips April, June, September, November and February (never moved to
    the 30th or the 28th), and an instant in a skipped month is no occurrence."""
    first = berlin(2027, 1, 31, 9, 0)
    year = list(
        occurrences(
            first,
            Repeat.MONTHLY,
            [],
            "Europe/Berlin",
            first - timedelta(1),
            berlin(2027, 12, 31, 23),
        )
    )
    assert [o.astimezone(BERLIN).strftime("%b %d %H:%M") for o in year] == [
        "Jan 31 09:00",
        "Mar 31 09:00",
        "May 31 09:00",
        "Jul 31 09:00",
        "Aug 31 09:00",
        "Oct 31 09:00",
        "Dec 31 09:00",
    ]
    assert not is_occurrence(berlin(2027, 4, 30, 9, 0), first, Repeat.MONTHLY, [], "Europe/Berlin")


def test_a_lead_per_follow_up_overrides_the_users_default(make_user):
    """A lead per follow-up: 45 minutes on this one, the user's 10 on the other."""
    user = make_user(default_lead_minutes=10)
    own = add_follow_up(user, NOW + timedelta(hours=2), title="Pick up the keys")
    update(user, own, reminder_minutes=[45])
    add_follow_up(user, NOW + timedelta(hours=2), title="Water the plants")
    run_materialize(NOW)
    assert sorted((r.ref_id, r.fire_at) for r in rows(user)) == sorted(
        [(own.pk, NOW + timedelta(minutes=75)), (own.pk + 1, NOW + timedelta(minutes=110))]
    )


def test_three_reminders_per_follow_up_queue_three_rows_held_to_the_users_cap(make_user, settings):
    """Several reminders per item: three leads are three rows of one follow-up; with
    NUDGE_MAX_NUDGES_PER_USER at 2 the earliest two stay and the third is counted capped."""
    user = make_user()
    item = add_follow_up(user, NOW + timedelta(hours=2))
    update(user, item, reminder_minutes=[60, 30, 5])
    run_materialize(NOW)
    assert [r.fire_at for r in rows(user)] == [
        NOW + timedelta(minutes=60),
        NOW + timedelta(minutes=90),
        NOW + timedelta(minutes=115),
    ]
    assert {r.ref_id for r in rows(user)} == {item.pk}

    settings.NUDGE_MAX_NUDGES_PER_USER = 2
    report = run_materialize(NOW + timedelta(minutes=15))  # the next cycle
    assert (report.removed, report.capped_nudges) == (1, 1)
    assert [r.fire_at for r in rows(user)] == [
        NOW + timedelta(minutes=60),
        NOW + timedelta(minutes=90),
    ]
    with tenant_scope(user.pk):
        assert DeliverySettings.objects.get(user=user).capped_nudges == 1


def test_a_calendar_switched_off_queues_nothing_and_withdraws_its_pending_rows(
    make_user, recording_channel
):
    """A per-calendar on/off switch: off withdraws the pending row at once and later
    runs queue nothing for it; the user's follow-ups are not touched; on again queues it."""
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1))
    add_follow_up(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    assert [r.kind for r in rows(user)] == ["event", "follow_up"]

    set_switches(user.pk, event.connection_id, nudges_on=False, skip_all_day=True, now=NOW)
    assert [r.kind for r in rows(user)] == ["follow_up"]
    assert run_materialize(NOW + timedelta(minutes=15)).queued == 0
    assert run_deliver(NOW + timedelta(minutes=50)).sent == 1
    assert len(recording_channel.sent) == 1

    set_switches(user.pk, event.connection_id, nudges_on=True, skip_all_day=True, now=NOW)
    assert "event" in [r.kind for r in rows(user)]


def test_a_row_claimed_before_its_calendar_was_switched_off_is_skipped_with_the_reason(
    make_user, recording_channel
):
    """A per-calendar on/off switch, at send time: a row the sweep had not yet withdrawn
    (switched off by the admin or another process) is skipped, not sent."""
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1))
    run_materialize(NOW)
    with tenant_scope(user.pk):
        CalendarConnection.objects.filter(pk=event.connection_id).update(nudges_on=False)
    run_deliver(NOW + timedelta(minutes=50))
    assert recording_channel.sent == []
    assert [(r.outcome, r.last_error) for r in rows(user)] == [
        ("skipped", "nudges are off for this calendar")
    ]


def test_skip_all_day_events_is_a_calendars_choice(make_user):
    """Skip all-day events: on (the default) an all-day event gets no nudge; switched
    off for its calendar it is nudged like any other, and on again withdraws it."""
    user = make_user()
    event = add_event(user, NOW + timedelta(hours=1), all_day=True)
    assert run_materialize(NOW).queued == 0

    set_switches(user.pk, event.connection_id, nudges_on=True, skip_all_day=False, now=NOW)
    assert [(r.kind, r.ref_id) for r in rows(user)] == [("event", event.pk)]

    set_switches(user.pk, event.connection_id, nudges_on=True, skip_all_day=True, now=NOW)
    assert rows(user) == []


def test_an_occurrence_the_rule_no_longer_has_is_skipped_not_sent(make_user, recording_channel):
    """Recurring follow-ups, at send time: a row queued for Thursday's occurrence of a
    weekly rule that now says Fridays only (changed behind the sweep's back) is skipped."""
    user = make_user(default_lead_minutes=10)
    weekly = add_follow_up(user, berlin(2026, 12, 3, 18, 0), title="Choir")  # a Thursday
    update(user, weekly, repeat=Repeat.WEEKLY, repeat_weekdays=[3], repeat_zone="Europe/Berlin")
    thursday = utc(2026, 12, 10, 15, 0)
    assert run_materialize(thursday).queued == 1
    update(user, weekly, repeat_weekdays=[4])
    assert run_deliver(utc(2026, 12, 10, 16, 50)).sent == 0
    assert recording_channel.sent == []
    assert [r.outcome for r in rows(user)] == ["skipped"]
    assert rows(user)[0].subject_starts_at == utc(2026, 12, 10, 17, 0)


def test_a_snooze_of_a_later_occurrence_of_a_repeating_follow_up_survives_the_re_plan(
    make_user,
):
    """Issue 22 (Snooze as a queue operation) with issue 24's repeating follow-ups: a
    snooze of today's occurrence of a daily follow-up (first due two days ago) is planned
    again by the next materialize, not withdrawn for not being the series' first time."""
    user = make_user(default_lead_minutes=10)
    first = utc(2026, 12, 1, 9, 0)
    daily = add_follow_up(user, first, title="Water the plants")
    update(user, daily, repeat=Repeat.DAILY, repeat_zone="UTC")
    now, today = utc(2026, 12, 3, 8, 50), utc(2026, 12, 3, 9, 0)
    with tenant_scope(user.pk):
        NudgeAct.objects.create(
            user_id=user.pk,
            source_send_id=1,
            act=NudgeAct.Act.SNOOZE,
            kind=Kind.FOLLOW_UP,
            ref_id=daily.pk,
            subject_starts_at=today,
            snoozed_until=utc(2026, 12, 3, 8, 58),
            via="telegram",
            created_at=now,
        )
    run_materialize(now)
    assert sorted(r.intended_at for r in rows(user) if r.subject_starts_at == today) == [
        utc(2026, 12, 3, 8, 50),
        utc(2026, 12, 3, 8, 58),
    ]
