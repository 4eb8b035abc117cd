"""The support console in a real browser: log in, open stuck claims, release one.

Headless Debian Chromium driven by Playwright against ``live_server``. Playwright
never downloads a browser here; the test is skipped only where no Chromium
binary is installed (``apt-get install chromium``).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from .browser import (  # noqa: F401 - fixtures
    ARTIFACTS,
    CHROMIUM_ARGS,
    _plain_http,
    _rebuild_middleware_after,
    chromium_binary,
    http_live_server,
)
from .conftest import PASSWORD, lease, reload, state_now


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_release_a_stuck_claim_in_the_browser(http_live_server, make_user, make_send):  # noqa: F811
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    live_server = http_live_server
    get_user_model().objects.create_user(
        "support", "support@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    now = timezone.now()
    alice = make_user("alice", timezone="America/New_York")
    stuck = make_send(
        alice,
        fire_at=now - timedelta(minutes=1),
        claimed_at=now - lease() - timedelta(minutes=1),
        claim_token=uuid.uuid4(),
        send_started_at=None,
    )
    ARTIFACTS.mkdir(exist_ok=True)

    # No ORM inside this block: Playwright's sync API runs an event loop here.
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "support")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")

            stuck_link = page.locator("#nudge-stuck-link")
            expect(page.locator("li[data-check=stuck_claims]")).to_contain_text(
                "1 claim is older than the lease"
            )
            page.screenshot(path=str(ARTIFACTS / "admin-index.png"), full_page=True)
            stuck_link.click()

            expect(page.locator("#result_list tbody tr")).to_have_count(1)
            page.screenshot(path=str(ARTIFACTS / "admin-stuck-claims.png"), full_page=True)
            page.check(f"input[name=_selected_action][value='{stuck.pk}']")
            page.select_option("select[name=action]", "release_claim")
            page.click("button[name=index]")

            expect(page.locator("#nudge-confirm-rows")).to_contain_text(str(stuck.claim_token))
            page.screenshot(path=str(ARTIFACTS / "admin-release-confirm.png"), full_page=True)
            expect(page.locator("#nudge-confirm-count")).to_have_text(
                "This will change 1 row of the 1 row you selected."
            )
            page.click("input[type=submit][value='Yes, release 1 row']")

            expect(page.locator("ul.messagelist")).to_contain_text("Released 1 stuck claim(s).")
            page.screenshot(path=str(ARTIFACTS / "admin-release-stuck-claim.png"), full_page=True)
        finally:
            browser.close()

    row = reload(stuck)
    assert (row.claimed_at, row.claim_token) == (None, None)
    assert state_now(row) == "pending"
