"""Issue 24 in a real browser: the user pages this issue changed, at 390 and 1280 px.

A user whose history holds a failure for a configuration reason (with the raw
provider text recorded) and a nudge support skipped with its own note; a
follow-up far ahead; a long unbroken title. Every page is shot at both widths
(``test-artifacts/portal-issue24-*``) and must not scroll sideways on a phone.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from accounts.actions import ensure_settings
from accounts.models import DeliverySettings
from core.config import NudgeConfig
from followups import actions as followups
from scheduled_sends.failures import FailureKind
from scheduled_sends.queue import transitions
from tenancy.scope import support_scope, tenant_scope
from tests.admin.test_browser import ARTIFACTS, CHROMIUM_ARGS, chromium_binary
from tests.support.queue import settle_one

from .conftest import PASSWORD
from .test_as_people_meet_it import RAW_CONFIG_ERROR, enqueue_one, queue_one
from .test_browser import PHONE, no_sideways_scroll, shoot


@pytest.fixture
def _plain_http():
    """Replaces the autouse override: ``http_live_server`` owns it here."""


def a_user_with_a_history() -> None:
    user = get_user_model().objects.create_user("mia", "mia@example.com", PASSWORD)
    with tenant_scope(user.pk):
        ensure_settings(user.pk)
        DeliverySettings.objects.filter(user_id=user.pk).update(channel="console")
    now = timezone.now().replace(microsecond=0)
    failed = queue_one(user, now - timedelta(minutes=40), ref_id=999_101)
    settle_one(
        failed,
        transitions.Transition.FAILED,
        now - timedelta(minutes=40),
        failure_kind=FailureKind.CONFIGURATION,
        reason=RAW_CONFIG_ERROR,
    )
    row_id = enqueue_one(user, now + timedelta(minutes=50), ref_id=999_102)
    with support_scope():
        transitions.skip_unsent(row_id, "skipped by support: ticket 88", timedelta(minutes=5))
    config = NudgeConfig.from_settings()
    followups.create_follow_up(user.pk, "Call back", now + timedelta(minutes=4), now, config)
    followups.create_follow_up(
        user.pk, "Renew passport", now.replace(year=now.year + 1, month=2, day=1), now, config
    )
    followups.create_follow_up(user.pk, "W" * 200, now + timedelta(days=2), now, config)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_changed_user_pages_read_well_on_a_phone_and_a_desktop(http_live_server, settings):
    """Issue 24 — users see sentences, never internals (pills wrap at 390 px); dead ends
    (OAuth "not available" inline, account page); confirm before delete; the token
    shown once with a copy button."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    settings.GOOGLE_CLIENT_ID = ""
    settings.MICROSOFT_CLIENT_ID = ""
    a_user_with_a_history()
    base = http_live_server.url
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_context(viewport=PHONE, timezone_id="America/New_York").new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", "mia")
            page.fill("#id_password", PASSWORD)
            page.click("#sign-in")

            page.goto(f"{base}/")
            history = page.locator("#history")
            expect(history).to_contain_text("This server could not send it")
            expect(history).to_contain_text("Our support team cancelled this nudge.")
            expect(history).not_to_contain_text("TWILIO")
            expect(page.locator("#upcoming")).to_contain_text("now")
            shoot(page, "issue24-home")

            page.goto(f"{base}/follow-ups/")
            expect(page.locator("#follow-up-list")).to_contain_text(f"{timezone.now().year + 1}")
            shoot(page, "issue24-follow-ups")
            page.locator("#follow-up-list a.danger").first.click()
            expect(page.locator("#confirm-heading")).to_contain_text("Delete “")
            shoot(page, "issue24-confirm-delete")
            page.click("#confirm")
            expect(page.locator(".messages")).to_contain_text("its nudges are cancelled")

            page.goto(f"{base}/settings/")
            page.fill("#id_name", "shop backend")
            page.locator("#api-tokens button[type=submit]").click()
            expect(page.locator("#new-token-value")).to_contain_text("nudge_")
            expect(page.locator("#copy-token")).to_be_visible()
            shoot(page, "issue24-token-once")
            page.reload()  # no second token, no resubmission
            expect(page.locator("#new-token")).to_have_count(0)
            expect(page.locator("#api-tokens li")).to_have_count(1)

            page.goto(f"{base}/calendars/")
            expect(page.locator("#google-unavailable")).to_be_visible()
            shoot(page, "issue24-calendars")

            page.goto(f"{base}/account/")
            expect(page.locator("#account-email input[name=email]")).to_have_value(
                "mia@example.com"
            )
            shoot(page, "issue24-account")

            # The account is still on UTC: Home offers the device's own zone.
            page.goto(f"{base}/")
            expect(page.locator("#zone-offer")).to_contain_text("America/New York")
            shoot(page, "issue24-zone-offer")
            page.click("#zone-offer-use")
            expect(page.locator(".messages")).to_contain_text("now shown in America/New York")
            expect(page.locator("#zone-offer")).to_have_count(0)

            page.locator("nav button").click()  # sign out
            expect(page.locator(".messages")).to_contain_text("You are signed out.")
            assert no_sideways_scroll(page)
        finally:
            browser.close()
