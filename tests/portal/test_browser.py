"""A new user in a real browser: sign in, link Telegram, set quiet hours, add a
follow-up due in 12 minutes, see its nudge in "upcoming", receive it.

Headless Debian Chromium driven by Playwright against the live server, with
the real Telegram channel and python-telegram-bot talking to the fake Bot API.
Screenshots at 390 px and 1280 px go to test-artifacts/; at 390 px no page may
scroll sideways. A second person, with a German browser, sees Home and Settings
in German, then chooses Spanish and a 12-hour clock (issue 22, item 5).
"""

from __future__ import annotations

import zoneinfo
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections
from django.utils import timezone
from playwright.sync_api import Page, expect, sync_playwright

from core.config import NudgeConfig
from followups import actions as followups
from sweeps.deliver import run_deliver
from tests.admin.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_binary

from .conftest import BOT_USERNAME, PASSWORD

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
CHAT = 424242
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture
def _plain_http():
    """Replaces the autouse override: ``http_live_server`` owns it here."""


def off_the_event_loop(function, *args, **kwargs):
    """Database work from inside Playwright's sync block runs in another thread
    (Django refuses synchronous queries where an event loop is running)."""

    def run():
        try:
            return function(*args, **kwargs)
        finally:
            connections.close_all()  # this thread's connection; the test database is dropped later

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def no_sideways_scroll(page: Page) -> bool:
    return page.evaluate(
        "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )


def shoot(page: Page, name: str) -> None:
    """Save the page at phone and desktop widths; at phone width it must not scroll sideways."""
    for label, size in (("390", PHONE), ("1280", DESKTOP)):
        page.set_viewport_size(size)
        page.screenshot(path=str(ARTIFACTS / f"portal-{name}-{label}.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert no_sideways_scroll(page), f"{name} scrolls sideways at 390 px"


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_new_user_sets_up_and_receives_a_follow_up_nudge(
    http_live_server, telegram_settings, fake_telegram
):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    telegram_settings.TELEGRAM_BOT_USERNAME = BOT_USERNAME
    base = http_live_server.url
    get_user_model().objects.create_user("newcomer", "newcomer@example.com", PASSWORD)
    now = timezone.now()
    due = (now + timedelta(minutes=12)).replace(second=0, microsecond=0)
    quiet_from = (now + timedelta(hours=3)).astimezone(BERLIN)
    quiet_until = (now + timedelta(hours=4)).astimezone(BERLIN)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            # A browser in Berlin, in British English: English pages, a 24-hour clock.
            context = browser.new_context(
                viewport=PHONE, timezone_id="Europe/Berlin", locale="en-GB"
            )
            page = context.new_page()

            page.goto(f"{base}/")
            expect(page).to_have_url(f"{base}/accounts/login/?next=/")
            shoot(page, "sign-in")
            page.fill("#id_username", "newcomer")
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")
            expect(page.locator("#status-unlinked")).to_be_visible()
            shoot(page, "home-new-user")

            page.goto(f"{base}/settings/")
            # The zone defaults from the browser's own.
            expect(page.locator("#id_timezone")).to_have_value("Europe/Berlin")
            page.click("#link-telegram")
            # A waiting page: the button for the phone, the QR code for a desktop.
            expect(page.locator("#telegram-waiting")).to_contain_text("Waiting for Telegram")
            expect(page.locator("#telegram-qr")).to_be_visible()
            shoot(page, "telegram-waiting")
            # "Open Telegram" is a plain link to t.me (the test reads it rather than
            # leaving the waiting page, which is the one that notices the link).
            link = page.locator("#open-telegram").get_attribute("href")
            assert link.startswith(f"https://t.me/{BOT_USERNAME}?start=")
            code = parse_qs(urlsplit(link).query)["start"][0]

            # The user presses Start in Telegram; the bot receives it by polling.
            fake_telegram.push_message(CHAT, f"/start {code}")
            off_the_event_loop(call_command, "telegram_poll", "--once", "--timeout", "0")
            assert [d.text for d in fake_telegram.delivered_to(str(CHAT))] == [
                "Linked. Your nudges will arrive in this chat. Send /stop to pause them."
            ]

            # The waiting page notices by itself and moves on to Settings.
            page.wait_for_url(f"{base}/settings/#telegram", timeout=15_000)
            expect(page.locator("#telegram-linked")).to_be_visible()
            expect(page.locator("#id_channel")).to_have_value("telegram")
            page.select_option("#id_timezone", "Europe/Berlin")
            page.fill("#id_quiet_start", quiet_from.strftime("%H:%M"))
            page.fill("#id_quiet_end", quiet_until.strftime("%H:%M"))
            page.click("#save-settings")
            expect(page.locator(".messages")).to_contain_text("Settings saved.")
            expect(page.locator("#id_quiet_start")).to_have_value(quiet_from.strftime("%H:%M"))
            shoot(page, "settings")

            page.goto(f"{base}/")
            page.fill("#id_title", "Call the dentist")
            page.fill("#id_due_at", due.astimezone(BERLIN).strftime("%Y-%m-%dT%H:%M"))
            page.click("main button[type=submit]")
            upcoming = page.locator("#upcoming")
            expect(upcoming).to_contain_text("Call the dentist")
            fire_local = (due - timedelta(minutes=10)).astimezone(BERLIN)
            expect(upcoming).to_contain_text(fire_local.strftime("%H:%M"))
            shoot(page, "home-upcoming")

            report = off_the_event_loop(run_deliver, due - timedelta(minutes=10, seconds=-5))
            assert report.sent == 1, report.summary()
            nudges = [d.text for d in fake_telegram.delivered_to(str(CHAT))][1:]
            assert len(nudges) == 1 and "Call the dentist" in nudges[0]
            assert f"{due.astimezone(BERLIN):%H:%M}" in nudges[0]  # in the user's zone

            page.reload()
            expect(page.locator("#history")).to_contain_text("Call the dentist")
            expect(page.locator("#history .tag.sent")).to_have_count(1)
            shoot(page, "home-history")

            page.goto(f"{base}/follow-ups/")
            expect(page.locator("#follow-up-list")).to_contain_text("Call the dentist")
            shoot(page, "follow-ups")
            page.goto(f"{base}/calendars/")
            shoot(page, "calendars")
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_home_and_settings_in_the_browsers_language_then_the_chosen_one(http_live_server):
    """Issue 22, item 5 ("How it is measured"): Settings and Home in two languages at
    390 px. The first visit takes German and 24 hours from the browser; choosing
    Español and 12 hours in Settings turns the pages (and the times on them) with it."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    base = http_live_server.url
    user = get_user_model().objects.create_user("lena", "lena@example.com", PASSWORD)
    due = (timezone.now() + timedelta(hours=1)).replace(second=0, microsecond=0)
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(
                viewport=PHONE, timezone_id="Europe/Berlin", locale="de-DE"
            )
            page = context.new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", "lena")
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")
            expect(page.locator("h1")).to_have_text("Deine Erinnerungen")
            expect(page.locator("nav")).to_contain_text("Einstellungen")
            expect(page.locator("html")).to_have_attribute("lang", "de")

            page.goto(f"{base}/settings/")
            expect(page.locator("h1")).to_have_text("Einstellungen")
            expect(page.locator("#id_language")).to_have_value("de")
            expect(page.locator("#id_clock")).to_have_value("24h")
            shoot(page, "settings-de")

            page.select_option("#id_channel", "console")  # linked (the development channel)
            page.select_option("#id_language", "es")
            page.select_option("#id_clock", "12h")
            page.click("#save-settings")
            expect(page.locator(".messages")).to_contain_text("Ajustes guardados.")
            expect(page.locator("h1")).to_have_text("Ajustes")
            expect(page.locator("#save-settings")).to_have_text("Guardar ajustes")
            shoot(page, "settings-es")

            off_the_event_loop(
                followups.create_follow_up,
                user.pk,
                "Llamar al banco",
                due,
                timezone.now(),
                NudgeConfig.from_settings(),
            )
            page.goto(f"{base}/")
            expect(page.locator("h1")).to_have_text("Tus avisos")
            expect(page.locator("nav")).to_contain_text("Seguimientos")
            upcoming = page.locator("#upcoming")
            expect(upcoming).to_contain_text("Llamar al banco")
            expect(upcoming).to_contain_text(due.astimezone(BERLIN).strftime("%-I:%M"))
            shoot(page, "home-es")

            page.goto(f"{base}/settings/")
            page.select_option("#id_language", "de")
            page.click("#save-settings")
            page.goto(f"{base}/")
            expect(page.locator("h1")).to_have_text("Deine Erinnerungen")
            shoot(page, "home-de")
        finally:
            browser.close()
