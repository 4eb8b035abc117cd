"""Issue 24, "what users of reminder tools expect", as a person meets it on the pages:
quick choices on the follow-up form, repeat and reminders on it, and a calendar's
on/off and all-day switches on the Calendars page."""

from __future__ import annotations

import zoneinfo
from datetime import datetime, time, timedelta

from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent, Provider
from followups.models import FollowUp
from followups.repeat import Repeat
from tenancy.scope import tenant_scope

from .conftest import local_input, pending

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def _in_berlin(user) -> None:
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(timezone="Europe/Berlin")


def _only_follow_up(user) -> FollowUp:
    with tenant_scope(user.pk):
        return FollowUp.objects.get(user_id=user.pk)


def test_quick_choice_buttons_set_the_due_time_in_the_users_zone(signed_in):
    """Quick choices: the form offers them, "Tomorrow 9:00" is 9:00 Berlin time the next
    day with no time typed, and "In 1 h" is an hour from now; each is queued at once."""
    user, client = signed_in("ana")
    _in_berlin(user)
    page = client.get(reverse("portal:follow_ups")).content.decode()
    for value, label in (("in_1h", "In 1 h"), ("tomorrow_morning", "Tomorrow 9:00")):
        assert f'name="quick" value="{value}">{label}</button>' in page

    before = timezone.now()
    response = client.post(
        reverse("portal:follow_ups"), {"title": "Call the plumber", "quick": "tomorrow_morning"}
    )
    assert response.status_code == 302
    tomorrow = before.astimezone(BERLIN).date() + timedelta(days=1)
    assert _only_follow_up(user).due_at == datetime.combine(tomorrow, time(9), tzinfo=BERLIN)
    listed = client.get(reverse("portal:follow_ups")).content.decode()
    assert "due " in listed and "09:00" in listed  # the message says when

    client.post(reverse("portal:follow_up_delete", args=[_only_follow_up(user).pk]))
    client.post(reverse("portal:home"), {"title": "Tea", "quick": "in_1h"})
    due = _only_follow_up(user).due_at
    assert before + timedelta(hours=1) <= due <= timezone.now() + timedelta(hours=1)
    assert [row.subject_starts_at for row in pending(user)] == [due]


def test_a_quick_choice_replaces_a_time_typed_in_the_past(signed_in):
    """A time typed in the past was refused; pressing "In 1 h" on the form shown again with
    it (the browser sends the typed time with the button) was refused the same way."""
    user, client = signed_in("ana")
    _in_berlin(user)
    typed = local_input(timezone.now() - timedelta(hours=2), BERLIN)
    fields = {"title": "Call back", "due_at": typed}
    response = client.post(reverse("portal:follow_ups"), fields)
    assert "That time has already passed." in response.content.decode()
    before = timezone.now()
    response = client.post(reverse("portal:follow_ups"), {**fields, "quick": "in_1h"})
    assert response.status_code == 302
    due = _only_follow_up(user).due_at
    assert before + timedelta(hours=1) <= due <= timezone.now() + timedelta(hours=1)


def test_without_a_time_or_a_quick_choice_the_form_says_what_to_do(signed_in):
    """Quick choices: neither a typed time nor a button is a plain sentence, nothing saved."""
    user, client = signed_in("ana")
    response = client.post(reverse("portal:follow_ups"), {"title": "Someday"})
    assert response.status_code == 200
    assert "Pick a time, or one of the quick choices." in response.content.decode()
    with tenant_scope(user.pk):
        assert not FollowUp.objects.filter(user_id=user.pk).exists()


def test_the_form_saves_a_repeat_and_several_reminders_and_the_list_shows_the_next_time(
    signed_in,
):
    """Recurring follow-ups and several reminders per item, from the form: every weekday
    at the typed local time, nudged 30 and 5 minutes before; the list shows "every
    weekday" and the next time; saving the title later keeps the (past) first time."""
    user, client = signed_in("ana")
    _in_berlin(user)
    first = (timezone.now() + timedelta(hours=2)).replace(second=0, microsecond=0)
    response = client.post(
        reverse("portal:follow_ups"),
        {
            "title": "Stand-up notes",
            "due_at": local_input(first, BERLIN),
            "repeat": "weekdays",
            "reminder_minutes": ["30", "5"],
        },
    )
    assert response.status_code == 302
    saved = _only_follow_up(user)
    assert (saved.repeat, saved.repeat_zone, saved.reminder_minutes) == (
        Repeat.WEEKDAYS,
        "Europe/Berlin",
        [5, 30],
    )
    listed = client.get(reverse("portal:follow_ups")).content.decode()
    assert "every weekday" in listed
    if first.astimezone(BERLIN).weekday() < 5:  # a weekday: the first time is also the next
        assert sorted(row.intended_at for row in pending(user)) == [
            first - timedelta(minutes=30),
            first - timedelta(minutes=5),
        ]
    with tenant_scope(user.pk):  # the series began long ago
        FollowUp.objects.filter(pk=saved.pk).update(
            due_at=first - timedelta(days=30, seconds=-17)  # as the API may set it
        )
    edit = reverse("portal:follow_up_edit", args=[saved.pk])
    form = client.get(edit).content.decode()
    assert 'value="weekdays" selected' in form
    response = client.post(
        edit,
        {
            "title": "Stand-up",
            "due_at": local_input(first - timedelta(days=30), BERLIN),
            "repeat": "weekdays",
            "reminder_minutes": ["30", "5"],
        },
    )
    assert response.status_code == 302, response.content.decode()
    assert _only_follow_up(user).title == "Stand-up"


def _daily_since_a_month(user, wall: time, zone: str = "Europe/Berlin") -> FollowUp:
    """A daily follow-up at ``wall`` in ``zone`` whose series began 30 days ago."""
    local = zoneinfo.ZoneInfo(zone)
    first = datetime.combine(timezone.localdate(timezone=local) - timedelta(days=30), wall, local)
    with tenant_scope(user.pk):
        return FollowUp.objects.create(
            user=user, title="Stand-up", due_at=first, repeat=Repeat.DAILY, repeat_zone=zone
        )


def _shown_due(page: str) -> str:
    return page.split('name="due_at" value="', 1)[1].split('"', 1)[0]


def test_editing_a_repeating_follow_up_shows_its_next_time_and_changes_its_time_of_day(
    signed_in,
):
    """The Edit form of a daily 9:00 begun a month ago showed that first, past date; moving
    it to 10:00 there was refused as "already passed". It shows the next time, as the list
    does; 10:00 on it is saved, and the series is at 10:00 from then on."""
    user, client = signed_in("ana")
    _in_berlin(user)
    follow_up = _daily_since_a_month(user, time(9))
    edit = reverse("portal:follow_up_edit", args=[follow_up.pk])
    now = timezone.now()
    upcoming = datetime.combine(now.astimezone(BERLIN).date(), time(9), BERLIN)
    if upcoming <= now:
        upcoming = datetime.combine(upcoming.date() + timedelta(days=1), time(9), BERLIN)
    shown = _shown_due(client.get(edit).content.decode())
    assert shown == local_input(upcoming, BERLIN)

    fields = {"title": "Stand-up", "repeat": "daily"}
    response = client.post(edit, {**fields, "due_at": shown.replace("T09:00", "T10:00")})
    assert response.status_code == 302, response.content.decode()
    saved = _only_follow_up(user)
    assert saved.due_at == upcoming + timedelta(hours=1)
    assert saved.due_at.astimezone(BERLIN).time() == time(10)
    listed = client.get(reverse("portal:follow_ups")).content.decode()
    assert "10:00" in listed and "09:00" not in listed

    # Left as shown, the series is kept: also on a form opened before that time passed.
    shown = _shown_due(client.get(edit).content.decode())
    response = client.post(edit, {**fields, "title": "Stand-up notes", "due_at": shown})
    assert response.status_code == 302, response.content.decode()
    assert _only_follow_up(user).due_at == saved.due_at
    with tenant_scope(user.pk):
        FollowUp.objects.all().delete()
    follow_up = _daily_since_a_month(user, time(9))
    edit = reverse("portal:follow_up_edit", args=[follow_up.pk])
    passed = local_input(upcoming - timedelta(days=1), BERLIN)
    response = client.post(edit, {**fields, "title": "Stand-up", "due_at": passed})
    assert response.status_code == 302, response.content.decode()
    assert _only_follow_up(user).due_at == follow_up.due_at


def test_editing_a_follow_up_s_title_keeps_the_zone_its_repeat_follows(signed_in):
    """A daily 9:00 New York follow-up (set so through the API), its title changed on the
    website by a person in Berlin, moved to Berlin's wall clock: in the weeks the US is
    on summer time and Europe not yet, it came at 10:00 New York. The zone is kept; a due
    time typed anew is on the person's clock, as the form's label says."""
    user, client = signed_in("ana")
    _in_berlin(user)
    follow_up = _daily_since_a_month(user, time(9), "America/New_York")
    edit = reverse("portal:follow_up_edit", args=[follow_up.pk])
    shown = _shown_due(client.get(edit).content.decode())
    fields = {"title": "Stand-up with NY", "repeat": "daily", "due_at": shown}
    assert client.post(edit, fields).status_code == 302
    saved = _only_follow_up(user)
    assert (saved.repeat_zone, saved.due_at) == ("America/New_York", follow_up.due_at)

    retyped = shown[:-5] + "23:00"  # later than 9:00 New York, that day in Berlin
    response = client.post(edit, {**fields, "due_at": retyped})
    assert response.status_code == 302, response.content.decode()
    saved = _only_follow_up(user)
    assert saved.repeat_zone == "Europe/Berlin"
    assert local_input(saved.due_at, BERLIN) == retyped


def test_more_than_five_reminders_are_refused_on_the_form(signed_in):
    """Several reminders per item, up to the per-event cap (five)."""
    user, client = signed_in("ana")
    response = client.post(
        reverse("portal:follow_ups"),
        {
            "title": "Too many",
            "quick": "in_3h",
            "reminder_minutes": ["0", "5", "10", "15", "30", "60"],
        },
    )
    assert response.status_code == 200
    assert "Pick at most 5 reminders." in response.content.decode()
    with tenant_scope(user.pk):
        assert not FollowUp.objects.filter(user_id=user.pk).exists()


def _calendar_with_event(user, **event_fields) -> CalendarConnection:
    with tenant_scope(user.pk):
        calendar = CalendarConnection.objects.create(
            user=user, provider=Provider.ICS, account="Team calendar"
        )
        starts_at = timezone.now() + timedelta(hours=1)
        CalendarEvent.objects.create(
            user=user,
            connection=calendar,
            provider_event_id="standup",
            title="Team sync",
            starts_at=starts_at,
            ends_at=starts_at + timedelta(minutes=30),
            **event_fields,
        )
    return calendar


def test_switching_a_calendar_off_on_its_card_withdraws_its_nudges(signed_in):
    """A per-calendar on/off switch on the Calendars page: unticking "Nudge me for its
    events" withdraws the pending nudge at once; ticking it again queues it."""
    user, client = signed_in("ana")
    calendar = _calendar_with_event(user)
    client.post(reverse("portal:calendar_switches", args=[calendar.pk]), {"nudges_on": "on"})
    assert [row.kind for row in pending(user)] == ["event"]

    page = client.get(reverse("portal:calendars")).content.decode()
    assert 'name="nudges_on" checked' in page and "Nudge me for its events" in page
    response = client.post(
        reverse("portal:calendar_switches", args=[calendar.pk]), {"skip_all_day": "on"}
    )
    assert response.status_code == 302
    assert pending(user) == []
    page = client.get(reverse("portal:calendars")).content.decode()
    assert "Nudges for ICS feed Team calendar are off." in page
    assert 'name="nudges_on" checked' not in page
    client.post(
        reverse("portal:calendar_switches", args=[calendar.pk]),
        {"nudges_on": "on", "skip_all_day": "on"},
    )
    assert [row.kind for row in pending(user)] == ["event"]


def test_skip_all_day_events_on_the_calendars_card(signed_in):
    """Skip all-day events: ticked by default (no nudge); unticked, the all-day event is
    nudged."""
    user, client = signed_in("ana")
    calendar = _calendar_with_event(user, all_day=True)
    page = client.get(reverse("portal:calendars")).content.decode()
    assert 'name="skip_all_day" checked' in page
    client.post(
        reverse("portal:calendar_switches", args=[calendar.pk]),
        {"nudges_on": "on", "skip_all_day": "on"},
    )
    assert pending(user) == []
    client.post(reverse("portal:calendar_switches", args=[calendar.pk]), {"nudges_on": "on"})
    assert [row.kind for row in pending(user)] == ["event"]


def test_another_users_calendar_cannot_be_switched(signed_in):
    """A per-calendar switch: only the owner's own calendars (404 otherwise)."""
    owner, _ = signed_in("ana")
    calendar = _calendar_with_event(owner)
    _, other = signed_in("ben")
    response = other.post(reverse("portal:calendar_switches", args=[calendar.pk]), {})
    assert response.status_code == 404
    with tenant_scope(owner.pk):
        assert CalendarConnection.objects.get(pk=calendar.pk).nudges_on


def test_a_weekly_follow_up_typed_for_another_day_is_first_due_on_a_ticked_day(make_user):
    """issue 33: typed for Sat 5 Dec with Mon and Thu ticked, it was listed as Mon 7 Dec
    while its Edit form and the admin said 5 Dec. Its first time is now the Monday,
    whichever page reads it."""
    from core.config import NudgeConfig
    from followups import actions

    user = make_user(timezone="Europe/Berlin")
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    now = datetime(2026, 12, 1, 12, 0, tzinfo=berlin)
    saturday = datetime(2026, 12, 5, 9, 0, tzinfo=berlin)
    schedule = actions.Schedule(repeat=Repeat.WEEKLY, repeat_weekdays=[0, 3])

    created = actions.create_follow_up(
        user.pk, "Stand-up", saturday, now, NudgeConfig.from_settings(), schedule
    )

    monday = datetime(2026, 12, 7, 9, 0, tzinfo=berlin)
    assert created.due_at == monday  # what the Edit form and the admin show
    assert actions.next_due(created, now) == monday  # what the list shows
    # Ticking Saturday too makes the typed day the first again.
    changed = actions.change_follow_up(
        user.pk,
        created.pk,
        actions.FollowUpChange(
            due_at=saturday,
            schedule=actions.Schedule(repeat=Repeat.WEEKLY, repeat_weekdays=[0, 3, 5]),
        ),
        now,
        NudgeConfig.from_settings(),
    )
    assert changed.due_at == saturday


def test_the_demo_calendar_is_listed_and_can_be_switched_off(signed_in):
    """issue 33: Calendars said "No calendars connected." while Home listed the demo's
    events from a hidden local calendar. It is listed, can be switched off (its nudges
    withdrawn), and has no Disconnect (there is nothing to disconnect from)."""
    user, client = signed_in("ana")
    with tenant_scope(user.pk):
        demo = CalendarConnection.objects.create(
            user=user, provider=Provider.LOCAL, account="demo calendar"
        )
        CalendarEvent.objects.create(
            user=user,
            connection=demo,
            provider_event_id="demo-1",
            title="Demo: check in",
            starts_at=timezone.now() + timedelta(minutes=40),
            ends_at=timezone.now() + timedelta(minutes=70),
        )
    client.post(reverse("portal:calendar_switches", args=[demo.pk]), {"nudges_on": "on"})
    assert [row.kind for row in pending(user)] == ["event"]

    page = client.get(reverse("portal:calendars")).content.decode()
    assert "No calendars connected." not in page and "demo calendar" in page
    assert reverse("portal:calendar_disconnect", args=[demo.pk]) not in page
    client.post(reverse("portal:calendar_switches", args=[demo.pk]), {})
    assert pending(user) == []
