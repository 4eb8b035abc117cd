"""Issue 24 in a real browser: the follow-up form's quick choices, repeat and
reminders, and a calendar's switches, at 390 px and 1280 px (screenshots in
test-artifacts/; no sideways scroll at 390 px)."""

from __future__ import annotations

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, CalendarEvent, Provider
from followups.models import FollowUp
from tenancy.scope import tenant_scope
from tests.admin.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_binary

from .conftest import PASSWORD
from .test_browser import PHONE, _plain_http, off_the_event_loop, shoot  # noqa: F401 — fixture


def _user_with_a_calendar() -> int:
    user = get_user_model().objects.create_user("rita", "rita@example.com", PASSWORD)
    with tenant_scope(user.pk):
        ensure_settings(user.pk)
        DeliverySettings.objects.filter(user_id=user.pk).update(
            channel="console", timezone="Europe/Berlin"
        )
        calendar = CalendarConnection.objects.create(
            user=user, provider=Provider.ICS, account="Family calendar"
        )
        starts_at = timezone.now() + timedelta(hours=1)
        CalendarEvent.objects.create(
            user=user,
            connection=calendar,
            provider_event_id="dinner",
            title="Dinner",
            starts_at=starts_at,
        )
    return user.pk


def _follow_ups(user_id: int) -> list[FollowUp]:
    with tenant_scope(user_id):
        return list(FollowUp.objects.filter(user_id=user_id))


def _nudges_on(user_id: int) -> bool:
    with tenant_scope(user_id):
        return CalendarConnection.objects.get(user_id=user_id).nudges_on


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_quick_choice_repeat_and_calendar_switch_in_the_browser(http_live_server):
    """Quick choices, recurring follow-ups with several reminders, and the per-calendar
    switch, as a person uses them: fill the title, open "Repeat and reminders", tick,
    press "Tomorrow 9:00"; on Calendars untick "Nudge me for its events" and save."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    base = http_live_server.url
    user_id = _user_with_a_calendar()
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_context(viewport=PHONE).new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", "rita")
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")

            page.goto(f"{base}/follow-ups/")
            page.fill("#id_title", "Take the bins out")
            page.click("summary:has-text('Repeat and reminders')")
            page.select_option("#id_repeat", "weekly")
            page.check("input[name=repeat_weekdays][value='0']")
            page.check("input[name=repeat_weekdays][value='3']")
            page.check("input[name=reminder_minutes][value='60']")
            page.check("input[name=reminder_minutes][value='10']")
            shoot(page, "follow-up-form-repeat")
            page.click("button[name=quick][value=tomorrow_morning]")
            # Tomorrow is the first day the series may begin; the message names its first
            # Monday or Thursday.
            expect(page.locator(".messages")).to_contain_text(re.compile(r"due (Mon|Thu) .*09:00"))
            expect(page.locator("#follow-up-list")).to_contain_text("every Mon, Thu")
            shoot(page, "follow-ups-repeating")
            [saved] = off_the_event_loop(_follow_ups, user_id)
            assert (saved.repeat, saved.repeat_weekdays) == ("weekly", [0, 3])
            assert saved.reminder_minutes == [10, 60]
            assert saved.due_at.astimezone(ZoneInfo("Europe/Berlin")).strftime("%H:%M") == "09:00"

            page.goto(f"{base}/calendars/")
            expect(page.locator("input[name=nudges_on]")).to_be_checked()
            shoot(page, "calendars-switches")
            page.uncheck("input[name=nudges_on]")
            page.click("form.switches button")
            expect(page.locator(".messages")).to_contain_text("are off")
            assert off_the_event_loop(_nudges_on, user_id) is False
        finally:
            browser.close()
