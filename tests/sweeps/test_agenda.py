"""Issue 36: the morning agenda. A queue row like any nudge, planned by materialize at
the person's chosen local time, sent by the real deliver path to the fake Telegram:
once at the minute for a thousand people, the right day east and west of UTC and
across a daylight-saving change, nothing on an empty day, its own kind in the charts."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent
from core.config import NudgeConfig
from followups.models import FollowUp
from messaging.messages import compose_agenda
from scheduled_sends.day import Item, day_of, items_between
from scheduled_sends.models import Kind, ScheduledSend
from sweeps.deliver import run_deliver
from sweeps.planning import UserSubjects, plan_for_user
from sweeps.replan import materialize_user, materialize_users
from tenancy.scope import rls_bypass, tenant_scope
from tests.conftest import new_user

JOIN = "https://meet.google.com/abc-defg-hij"


@pytest.fixture
def fast_telegram(telegram_settings, settings):
    settings.NUDGE_TELEGRAM_RATE = 2000.0
    return telegram_settings


def _agenda_rows(user_ids=None) -> list[ScheduledSend]:
    with rls_bypass():
        rows = ScheduledSend.objects.filter(kind=Kind.AGENDA)
        if user_ids is not None:
            rows = rows.filter(user_id__in=user_ids)
        return list(rows.order_by("user_id"))


def _person(name: str, zone: str, chat: int, agenda: time = time(7, 30), **fields):
    return new_user(
        name,
        channel="telegram",
        telegram_chat_id=str(chat),
        timezone=zone,
        agenda_at=agenda,
        **fields,
    )


def _follow_up(user, title: str, due: datetime) -> None:
    with tenant_scope(user.pk):
        FollowUp.objects.create(user=user, title=title, due_at=due)


def _event(user, title: str, start: datetime, join_url: str = "") -> None:
    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.filter(user=user).first()
        if connection is None:
            connection = CalendarConnection.objects.create(user=user, provider="ics")
        CalendarEvent.objects.create(
            user=user,
            connection=connection,
            provider_event_id=title,
            title=title,
            starts_at=start,
            join_url=join_url,
        )


def test_a_thousand_people_at_the_same_time_get_one_agenda_each_at_that_minute(
    fast_telegram, fake_telegram, db
):
    zone = ZoneInfo("Europe/Berlin")
    at = datetime(2026, 12, 4, 7, 30, tzinfo=zone)
    people = [_person(f"agenda{i}", "Europe/Berlin", 700_000 + i) for i in range(1000)]
    for user in people:
        _follow_up(user, "Send the report", at.replace(hour=16, minute=0))
    config = NudgeConfig.from_settings()
    ids = [u.pk for u in people]
    for start in range(0, len(ids), 200):
        materialize_users(ids[start : start + 200], at - timedelta(hours=2), config)
    # Planned twice (a second cycle): still one row each.
    materialize_users(ids[:200], at - timedelta(hours=1), config)
    rows = _agenda_rows(ids)
    assert len(rows) == 1000
    assert {r.intended_at for r in rows} == {at}
    assert run_deliver(at - timedelta(minutes=1)).sent == 0  # not before its minute
    report = run_deliver(at + timedelta(seconds=5))
    assert report.sent == 1000
    assert run_deliver(at + timedelta(seconds=30)).sent == 0  # once
    per_chat = Counter(d.recipient for d in fake_telegram.delivered)
    assert len(per_chat) == 1000 and set(per_chat.values()) == {1}
    assert fake_telegram.delivered[0].text == "Your day, Fri, Dec 4:\n• 16:00 Send the report"
    sent = _agenda_rows(ids)
    assert all(r.outcome == "sent" and r.sent_at >= at for r in sent)


@pytest.mark.parametrize(
    ("zone", "utc_instant", "day"),
    [
        # East of UTC: 07:30 on Friday in Auckland is Thursday 18:30 UTC.
        ("Pacific/Auckland", datetime(2026, 12, 3, 18, 30, tzinfo=UTC), "Fri, Dec 4"),
        # West: 07:30 on Friday in Los Angeles is Friday 15:30 UTC.
        ("America/Los_Angeles", datetime(2026, 12, 4, 15, 30, tzinfo=UTC), "Fri, Dec 4"),
    ],
)
def test_the_agenda_shows_its_own_local_day_east_and_west_of_utc(
    fast_telegram, fake_telegram, db, zone, utc_instant, day
):
    user = _person("traveller", zone, 555_001)
    local = utc_instant.astimezone(ZoneInfo(zone))
    _follow_up(user, "Water plants", local.replace(hour=18, minute=0))
    _follow_up(user, "Yesterday's", local.replace(hour=18) - timedelta(days=1))
    _follow_up(user, "Tomorrow's", local.replace(hour=9) + timedelta(days=1))
    _event(user, "Standup", local.replace(hour=9, minute=0), JOIN)
    materialize_user(user.pk, utc_instant - timedelta(hours=2), NudgeConfig.from_settings())
    [row] = _agenda_rows([user.pk])
    assert row.intended_at == utc_instant
    assert run_deliver(utc_instant).sent == 1
    [message] = fake_telegram.delivered
    assert message.text == f"Your day, {day}:\n• 09:00 Standup\n  {JOIN}\n• 18:00 Water plants"
    markup = fake_telegram.markup_of(555_001, 1)
    assert markup == {"inline_keyboard": [[{"text": "Join: Standup", "url": JOIN}]]}


def test_the_agenda_lists_the_days_all_day_events_and_not_tomorrows(
    fast_telegram, fake_telegram, db
):
    """An all-day event begins at midnight, before the agenda's 7:30: it is still the
    day's; tomorrow's begins at the day's end and is not."""
    zone = ZoneInfo("Europe/Berlin")
    at = datetime(2026, 12, 4, 7, 30, tzinfo=zone)
    user = _person("holiday", "Europe/Berlin", 555_006)
    midnight = at.replace(hour=0, minute=0)
    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.create(user=user, provider="ics")
        for title, start in (("Holiday", midnight), ("Trade fair", midnight + timedelta(days=1))):
            CalendarEvent.objects.create(
                user=user,
                connection=connection,
                provider_event_id=title,
                title=title,
                starts_at=start,
                ends_at=start + timedelta(days=1),
                all_day=True,
            )
    _follow_up(user, "Send the report", at.replace(hour=16, minute=0))
    materialize_user(user.pk, at - timedelta(hours=2), NudgeConfig.from_settings())
    assert run_deliver(at).sent == 1
    [message] = fake_telegram.delivered
    assert message.text == "Your day, Fri, Dec 4:\n• all day Holiday\n• 16:00 Send the report"


@pytest.mark.parametrize(
    ("zone", "utc_instant", "day"),
    [
        # The Sunday Berlin moves to summer time: 07:30 CEST is 05:30 UTC (CET: 06:30).
        ("Europe/Berlin", datetime(2027, 3, 28, 5, 30, tzinfo=UTC), "Sun, Mar 28"),
        # The Sunday New York moves to summer time: 07:30 EDT is 11:30 UTC.
        ("America/New_York", datetime(2027, 3, 14, 11, 30, tzinfo=UTC), "Sun, Mar 14"),
        # The Sunday Berlin moves back: 07:30 CET is 06:30 UTC (CEST: 05:30).
        ("Europe/Berlin", datetime(2027, 10, 31, 6, 30, tzinfo=UTC), "Sun, Oct 31"),
    ],
)
def test_across_a_daylight_saving_change_the_agenda_keeps_the_wall_clock_and_the_day(
    db, zone, utc_instant, day
):
    """Planned and written as delivery does (the queue's day partitions do not reach
    those dates here): the instant, its day, and the day's items in the new offset."""
    user = _person("dst", zone, 555_005)
    local = utc_instant.astimezone(ZoneInfo(zone))
    _follow_up(user, "Brunch", local.replace(hour=11, minute=0))
    _follow_up(user, "Late the day before", local.replace(hour=23, minute=0) - timedelta(days=1))
    with tenant_scope(user.pk):
        delivery = DeliverySettings.objects.get(user_id=user.pk)
    config = NudgeConfig.from_settings()
    now = utc_instant - timedelta(hours=2)
    [planned] = plan_for_user(UserSubjects(delivery=delivery), now, config)
    assert planned.intended_at == utc_instant
    assert planned.subject_starts_at == datetime.combine(
        local.date() + timedelta(days=1), time(0), tzinfo=ZoneInfo(zone)
    )
    with tenant_scope(user.pk):
        items = items_between(user.pk, planned.intended_at, planned.subject_starts_at)
    message = compose_agenda(
        items,
        day=day_of(planned.ref_id),
        now=utc_instant,
        tz_name=zone,
        valid_until=utc_instant + timedelta(minutes=5),
    )
    assert message.text == f"Your day, {day}:\n• 11:00 Brunch"


def test_a_join_buttons_title_is_cut_at_a_word_and_never_inside_an_emoji():
    """The agenda's Join buttons name their event in about 40 characters: cut like a
    title, with an ellipsis, never halfway through a word or a family emoji."""
    at = datetime(2026, 12, 4, 7, 30, tzinfo=UTC)
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
    titles = ("Réunion d'équipe avec les partenaires internationaux", "x" * 37 + family + " sync")
    items = [
        Item(Kind.EVENT, pk, at + timedelta(hours=pk), title, JOIN)
        for pk, title in enumerate(titles, start=1)
    ]
    message = compose_agenda(
        items, day=at.date(), now=at, tz_name="UTC", valid_until=at + timedelta(minutes=5)
    )
    assert [label for label, _url in message.links] == [
        "Join: Réunion d'équipe avec les partenaires…",
        "Join: " + "x" * 37 + "…",
    ]


def test_nothing_is_sent_on_an_empty_day_and_quiet_hours_hold_it(fast_telegram, fake_telegram, db):
    at = datetime(2026, 12, 4, 7, 30, tzinfo=UTC)
    empty = _person("empty", "UTC", 555_002)
    quiet = _person("quiet", "UTC", 555_003, quiet_start=time(22), quiet_end=time(8))
    _follow_up(quiet, "Dentist", at.replace(hour=15))
    config = NudgeConfig.from_settings()
    materialize_users([empty.pk, quiet.pk], at - timedelta(hours=2), config)
    by_user = {r.user_id: r for r in _agenda_rows([empty.pk, quiet.pk])}
    assert by_user[quiet.pk].intended_at == at.replace(hour=8, minute=0)  # after quiet hours
    run_deliver(at)
    [skipped] = _agenda_rows([empty.pk])
    assert (skipped.outcome, skipped.last_error) == ("skipped", "nothing on the day")
    assert fake_telegram.delivered == []
    assert run_deliver(at.replace(hour=8, minute=0)).sent == 1
    assert fake_telegram.delivered[0].recipient == "555003"


def test_turning_the_agenda_off_withdraws_its_row(db):
    from accounts.actions import update_settings

    now = datetime(2026, 12, 4, 6, 0, tzinfo=UTC)
    user = _person("offagain", "UTC", 555_004)
    materialize_user(user.pk, now, NudgeConfig.from_settings())
    assert len(_agenda_rows([user.pk])) == 1
    update_settings(user.pk, {"agenda_at": None}, now)
    assert _agenda_rows([user.pk]) == []


def test_the_agenda_is_its_own_kind_in_the_consoles_charts(fast_telegram, fake_telegram, db):
    from console import charts, panels

    at = datetime(2026, 12, 4, 7, 30, tzinfo=UTC)
    user = _person("charted", "UTC", 555_006)
    _follow_up(user, "Dentist", at.replace(hour=7, minute=40))
    materialize_user(user.pk, at - timedelta(hours=2), NudgeConfig.from_settings())
    assert run_deliver(at).sent == 2  # the agenda and the dentist's nudge (10 min before)
    config = NudgeConfig.from_settings()
    with rls_bypass():  # as the console reads it: every tenant's rows
        data = charts.outcomes(at + timedelta(minutes=5), config)
    [hour] = [h for h in data if h.sent_by_kind]
    assert hour.sent_by_kind == {"agenda": 1, "follow_up": 1}
    [kinds] = [p for p in panels.outcome_panels(data, prefix="") if p.chart_id == "kinds"]
    assert kinds.caption == "Calendar event: 0; Follow-up: 1; Agenda: 1."
