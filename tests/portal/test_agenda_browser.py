"""Issue 36 in a real browser: the morning agenda's option on Settings, at 390 and
1280 px, in English and in German (``test-artifacts/portal-issue36-*``)."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from tenancy.scope import tenant_scope
from tests.admin.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_binary

from .conftest import PASSWORD
from .test_browser import PHONE, no_sideways_scroll, off_the_event_loop, shoot


@pytest.fixture
def _plain_http():
    """Replaces the autouse override: ``http_live_server`` owns it here."""


def _settings_of(user_id: int) -> DeliverySettings:
    with tenant_scope(user_id):
        return DeliverySettings.objects.get(user_id=user_id)


def _set_language(user_id: int, language: str) -> None:
    with tenant_scope(user_id):
        DeliverySettings.objects.filter(user_id=user_id).update(language=language)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_agenda_option_on_settings_in_two_languages(http_live_server):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    user = get_user_model().objects.create_user("lea", "lea@example.com", PASSWORD)
    with tenant_scope(user.pk):
        ensure_settings(user.pk)
        DeliverySettings.objects.filter(user_id=user.pk).update(channel="console")
    base = http_live_server.url
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_context(viewport=PHONE).new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", "lea")
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")

            page.goto(f"{base}/settings/")
            agenda = page.locator("#agenda")
            expect(agenda).to_contain_text("Morning agenda")
            expect(page.locator("#id_agenda_at")).to_have_value("")  # off by default
            page.fill("#id_agenda_at", "7:30 am")
            page.click("#save-settings")
            expect(page.locator(".messages")).to_contain_text("Settings saved.")
            expect(page.locator("#id_agenda_at")).to_have_value("07:30")
            saved = off_the_event_loop(_settings_of, user.pk)
            assert saved.agenda_at == datetime.time(7, 30)
            agenda.scroll_into_view_if_needed()
            shoot(page, "issue36-agenda-en")

            off_the_event_loop(_set_language, user.pk, "de")
            page.goto(f"{base}/settings/")
            expect(page.locator("#agenda")).to_contain_text("Tagesübersicht am Morgen")
            expect(page.locator("#agenda-help")).to_contain_text("/agenda 7:30")
            page.fill("#id_agenda_at", "")
            page.click("#save-settings")
            expect(page.locator("#id_agenda_at")).to_have_value("")
            assert off_the_event_loop(_settings_of, user.pk).agenda_at is None
            page.fill("#id_agenda_at", "6:45")
            shoot(page, "issue36-agenda-de")
            assert no_sideways_scroll(page)
        finally:
            browser.close()
