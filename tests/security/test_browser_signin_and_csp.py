"""In a real browser: the Content-Security-Policy holds on the portal's and the admin's
pages without one violation, and wrong passwords end in the sign-in throttle's
message, readable at 390 px.

Headless Debian Chromium driven by Playwright against the live server (see
tests/admin/browser.py). Violations are collected both from the console and from
the ``securitypolicyviolation`` event, which a listener installed before any page
script records.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect, sync_playwright

from portal.tokens import new_api_token
from tenancy.scope import tenant_scope
from tests.admin.browser import (  # noqa: F401 — fixtures
    ARTIFACTS,
    CHROMIUM_ARGS,
    _rebuild_middleware_after,
    chromium_binary,
    http_live_server,
)
from tests.portal.test_browser import PHONE, no_sideways_scroll

PASSWORD = "correct horse battery staple 42"
LIMIT = 3

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""

PORTAL_PAGES = ["/", "/follow-ups/", "/settings/", "/calendars/", "/account/"]
ADMIN_PAGES = [
    "/admin/",
    "/admin/portal/apitoken/",
    "/admin/axes/accessattempt/",
    "/admin/scheduled_sends/scheduledsend/",
    "/admin/auth/user/",
    "/admin/auth/user/{user_id}/change/",
    "/admin/nudge/user/{user_id}/activity/",
]


@pytest.fixture
def _plain_http():
    """Replaces the autouse override: ``http_live_server`` owns it here."""


def violations(page: Page) -> list[str]:
    return page.evaluate("window.__cspViolations || []")


def visit_all(page: Page, base: str, paths: list[str], console: list[str]) -> None:
    for path in paths:
        response = page.goto(f"{base}{path}")
        assert response is not None and response.status == 200, path
        assert "Content-Security-Policy" in {k.title(): v for k, v in response.headers.items()}
        page.wait_for_load_state("load")
        assert violations(page) == [], (path, violations(page))
    assert [line for line in console if "Content Security Policy" in line] == []


def sign_in(page: Page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#sign-in")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_no_csp_violations_and_the_throttle_message_at_390_px(
    http_live_server,  # noqa: F811 — the fixture imported above
    settings,
):
    """issue 23 item 8 (CSP on the portal and the admin, no violations in the browser)
    and item 2 (the browser signs in, hits the throttle, and reads its message at 390 px)."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    settings.NUDGE_SIGNIN_FAILURE_LIMIT = LIMIT
    base = http_live_server.url
    users = get_user_model()
    person = users.objects.create_user("reader", "reader@example.com", PASSWORD)
    users.objects.create_user(
        "support", "support@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    with tenant_scope(person.pk):
        new_api_token(person.pk, "host")
    ARTIFACTS.mkdir(exist_ok=True)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            # The end-user area, signed in as an ordinary user.
            context = browser.new_context(viewport=PHONE)
            context.add_init_script(RECORD_VIOLATIONS)
            page = context.new_page()
            console: list[str] = []
            page.on("console", lambda message: console.append(message.text))
            sign_in(page, base, "reader", PASSWORD)
            expect(page).to_have_url(f"{base}/")
            visit_all(page, base, PORTAL_PAGES, console)
            # The zone script (inline, with the nonce) ran: it picks the browser's zone.
            page.goto(f"{base}/settings/")
            expect(page.locator("#id_timezone")).not_to_have_value("")
            context.close()

            # The support console, signed in as staff on the admin's own login page.
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_init_script(RECORD_VIOLATIONS)
            page = context.new_page()
            console = []
            page.on("console", lambda message: console.append(message.text))
            page.goto(f"{base}/admin/login/?next=/admin/")
            page.fill("#id_username", "support")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"{base}/admin/")
            admin_pages = [p.format(user_id=person.pk) for p in ADMIN_PAGES]
            visit_all(page, base, admin_pages, console)
            # The inline script that writes times in the viewer's zone ran under the policy.
            page.goto(f"{base}/admin/portal/apitoken/")
            expect(page.locator("#result_list")).to_contain_text("reader")
            context.close()

            # Wrong passwords, then even the right one: the throttle's page, on a phone.
            context = browser.new_context(viewport=PHONE)
            context.add_init_script(RECORD_VIOLATIONS)
            page = context.new_page()
            for _ in range(LIMIT - 1):
                sign_in(page, base, "reader", "not the password")
                expect(page.locator(".errorlist")).to_be_visible()
            sign_in(page, base, "reader", "not the password either")
            expect(page.locator("#locked-out")).to_be_visible()
            sign_in(page, base, "reader", PASSWORD)
            message = page.locator("#locked-out")
            expect(message).to_contain_text("Too many wrong passwords")
            expect(message).to_contain_text("15 minutes")
            expect(page).to_have_url(f"{base}/accounts/login/")
            assert no_sideways_scroll(page)
            assert violations(page) == []
            page.screenshot(path=str(ARTIFACTS / "security-locked-out-390.png"), full_page=True)
            context.close()
        finally:
            browser.close()
