"""Connecting iCloud in a real browser, at 390 px and 1280 px, in English and German:
the preset and where to make an app-specific password, "checking" while the minute job
finds the calendars, then ticking the calendars to use (screenshots in test-artifacts/;
no sideways scroll at 390 px)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from calendars.models import CalendarConnection, Provider
from tenancy.scope import tenant_scope
from tests.admin.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_binary

from .conftest import PASSWORD
from .test_browser import PHONE, _plain_http, off_the_event_loop, shoot  # noqa: F401 — fixture
from .test_caldav_pages import icloud_resolves  # noqa: F401 — fixture

FOUND = [
    {"url": "https://p01-caldav.icloud.com/1/calendars/work/", "name": "Work"},
    {"url": "https://p01-caldav.icloud.com/1/calendars/family/", "name": "Family"},
]


def _person(username: str, language: str) -> int:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", PASSWORD)
    with tenant_scope(user.pk):
        ensure_settings(user.pk)
        DeliverySettings.objects.filter(user_id=user.pk).update(
            channel="console", language=language
        )
    return user.pk


def _discovered(user_id: int) -> None:
    """What the minute job's discovery leaves on the account (``providers.caldav``)."""
    with tenant_scope(user_id):
        CalendarConnection.objects.filter(user_id=user_id, provider=Provider.CALDAV).update(
            sync_state={"calendars": FOUND}, last_synced_at="2026-12-02T08:00:00Z"
        )


def _calendar_ids(user_id: int) -> list[str]:
    with tenant_scope(user_id):
        return sorted(
            CalendarConnection.objects.filter(user_id=user_id).values_list("calendar_id", flat=True)
        )


@pytest.mark.browser
@pytest.mark.usefixtures("icloud_resolves")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("language", "connect", "use"),
    [
        ("en", "Connect iCloud", "Use these calendars"),
        ("de", "iCloud verbinden", "Diese Kalender verwenden"),
    ],
)
def test_connecting_icloud_in_the_browser(
    http_live_server,
    settings,
    language,
    connect,
    use,
):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
    base = http_live_server.url
    username = f"icloud-{language}"
    user_id = _person(username, language)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_context(viewport=PHONE).new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")
            page.goto(f"{base}/calendars/")
            page.click("#connect-icloud")
            expect(page.locator("#caldav h3")).to_have_text(connect)
            expect(page.locator("#caldav-help")).to_contain_text("account.apple.com")
            shoot(page, f"caldav-icloud-form-{language}")

            page.fill("#id_username", "ana@icloud.com")
            page.fill("#id_password", "abcd-efgh-ijkl-mnop")
            page.click("#caldav button[type=submit]")
            expect(page.locator("#connections .checking")).to_be_visible()
            assert "abcd-efgh-ijkl-mnop" not in page.content()
            shoot(page, f"caldav-icloud-checking-{language}")

            off_the_event_loop(_discovered, user_id)
            page.goto(f"{base}/calendars/")
            expect(page.locator("form.choose")).to_contain_text("Family")
            shoot(page, f"caldav-icloud-choose-{language}")
            page.locator("form.choose input[value$='/work/']").uncheck()
            page.click(f"form.choose button:has-text('{use}')")
            expect(page.locator("#connections .checking")).to_be_visible()
            shoot(page, f"caldav-icloud-chosen-{language}")
        finally:
            browser.close()
    assert off_the_event_loop(_calendar_ids, user_id) == ["/1/calendars/family/"]
