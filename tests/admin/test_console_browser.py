"""Every console page as support staff see it, in Chromium at 1440 and 390 px.

Screenshots of each page at both widths go to ``test-artifacts/``. At 1440 px
each page must not scroll sideways and no table cell may be narrower than
its text (a column squeezed so a label reads letter by letter). The landing
page's charts must draw from the seeded rows, and say "nothing" in words on
an empty queue. Times are written in the browser's zone, UTC on hover.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from accounts.models import DeliverySettings
from scheduled_sends.failures import INTERRUPTED_REASON, FailureKind
from scheduled_sends.models import SweepRun
from tenancy.scope import support_scope, tenant_scope

from .browser import (  # noqa: F401 - fixtures
    ARTIFACTS,
    CHROMIUM_ARGS,
    _plain_http,
    _rebuild_middleware_after,
    chromium_binary,
    http_live_server,
    login,
)
from .conftest import PASSWORD
from .console_data import SPIKE_TELEGRAM, seed_console

WIDE, NARROW = 1440, 390
VIEWER_ZONE = "America/New_York"
MIN_COLUMN = 80  # px at 1440: no column narrower, unless its longest word is
LANDING_CHARTS = (
    "lookahead-whatsapp",
    "lookahead-telegram",
    "lateness",
    "lateness-histogram",
    "outcomes",
    "failures",
)

# Cells (visible, with text) narrower than min(80 px, their longest word), or
# whose text overflows them; and whether the page scrolls sideways.
LAYOUT_PROBLEMS = """
(minColumn) => {
  const canvas = document.createElement("canvas").getContext("2d");
  const cells = [];
  for (const cell of document.querySelectorAll("table th, table td")) {
    if (!cell.getClientRects().length) continue;
    const text = cell.innerText.trim();
    if (!text) continue;
    const style = getComputedStyle(cell);
    canvas.font = style.font;
    const longest = Math.max(...text.split(/\\s+/).map((w) => canvas.measureText(w).width));
    const inner = cell.getBoundingClientRect().width
      - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (inner + 1 < Math.min(longest, minColumn) || cell.scrollWidth > cell.clientWidth + 1) {
      cells.push(`${Math.round(inner)}px for "${text.slice(0, 40)}"`);
    }
  }
  const root = document.documentElement;
  return {cells, sideways: root.scrollWidth - root.clientWidth};
}
"""


def _pages(seeded_user_id: int, sweep_run_id: int, settings_id: int) -> list[tuple[str, str]]:
    """Every changelist the console registers, plus the pages support opens from them."""
    pages = [
        ("index", reverse("admin:index")),
        ("user-activity", reverse("admin:nudge_user_activity", args=[seeded_user_id])),
        (
            "queue-stuck",
            reverse("admin:scheduled_sends_scheduledsend_changelist") + "?state=stuck",
        ),
        (
            "queue-overdue",
            reverse("admin:scheduled_sends_scheduledsend_changelist") + "?due=overdue",
        ),
        ("sweep-run", reverse("admin:scheduled_sends_sweeprun_change", args=[sweep_run_id])),
        (
            "delivery-settings-change",
            reverse("admin:accounts_deliverysettings_change", args=[settings_id]),
        ),
    ]
    for model in admin.site._registry:
        opts = model._meta
        name = f"{opts.app_label}-{opts.model_name}"
        pages.append((name, reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")))
    return pages


@contextmanager
def open_page() -> Iterator:
    """A page in headless Chromium at 1440 px, in the viewer's zone; no ORM while open
    (Playwright's sync API runs an event loop in this thread)."""
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no Chromium binary installed (apt-get install chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), headless=True, args=CHROMIUM_ARGS
        )
        try:
            context = browser.new_context(
                viewport={"width": WIDE, "height": 900}, timezone_id=VIEWER_ZONE
            )
            yield context.new_page()
        finally:
            browser.close()


@pytest.fixture
def support(db):
    """Support staff whose own zone is the browser's, so the pages read in that zone."""
    user = get_user_model().objects.create_user(
        "support", "support@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(user=user, timezone=VIEWER_ZONE)
    return user


def _look(page, url: str, name: str) -> dict:
    """Open ``url`` at both widths, screenshot each; the layout's problems at each width."""
    problems = {}
    for width in (WIDE, NARROW):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        page.screenshot(path=str(ARTIFACTS / f"console-{name}-{width}.png"), full_page=True)
        problems[width] = page.evaluate(LAYOUT_PROBLEMS, MIN_COLUMN)
    return problems


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_every_console_page_reads_at_1440_and_390(
    http_live_server,  # noqa: F811
    support,
    make_user,
    make_send,
    make_event,
    make_follow_up,
):
    alice = make_user(
        "alice", timezone="Europe/Berlin", channel="telegram", telegram_chat_id="4242"
    )
    users = [alice.pk] + [make_user(f"user{n}").pk for n in range(4)]
    seeded = seed_console(users, timezone.now())
    event = make_event(alice, "Quarterly planning with the finance team")
    make_follow_up(alice, "Call the bank about the mortgage offer")
    make_send(alice, kind="event", ref_id=event.pk, fire_at=event.starts_at - timedelta(minutes=10))
    interrupted = make_send(
        alice,
        fire_at=timezone.now() - timedelta(minutes=3),
        outcome="failed",
        attempts=1,
        last_error=INTERRUPTED_REASON,
        failure_kind=FailureKind.INTERRUPTED,
        send_started_at=timezone.now() - timedelta(minutes=3),
    )
    run = SweepRun.objects.create(
        sweep="deliver",
        status="ok",
        as_of=timezone.now(),
        finished_at=timezone.now(),
        summary="claimed 40, sent 38, failed 2",
        counts={"claimed": 40, "sent": 38},
    )
    SweepRun.objects.create(sweep="materialize", status="ok", as_of=timezone.now())
    with support_scope():
        settings_id = DeliverySettings.objects.get(user=alice).pk
    pages = _pages(alice.pk, run.pk, settings_id)
    pages.append(
        ("calendar-event", reverse("admin:calendars_calendarevent_change", args=[event.pk]))
    )
    assert seeded.spike_minute > timezone.now()

    with open_page() as page:
        _walk(page, http_live_server.url, pages, interrupted.pk)


def _walk(page, base: str, pages: list[tuple[str, str]], interrupted_pk: int) -> None:
    changelist = reverse("admin:scheduled_sends_scheduledsend_changelist")
    login(page, base, "support", PASSWORD)
    seen: dict[str, dict] = {}
    sideways_at_390: dict[str, int] = {}
    for name, path in pages:
        found = _look(page, base + path, name)
        seen[name] = found[WIDE]
        sideways_at_390[name] = found[NARROW]["sideways"]

    # The landing page: the state in words, the times in the viewer's zone.
    page.set_viewport_size({"width": WIDE, "height": 900})
    page.goto(base + "/admin/")
    expect(page.locator("#nudge-state")).to_contain_text("Needs attention")
    expect(page.locator("li[data-check=stuck_claims]")).to_contain_text("1 claim is older")
    # The state and every check fit the first screen at 1440 x 900.
    last_check = page.locator("ul.nudge-checks li").last.bounding_box()
    assert last_check["y"] + last_check["height"] <= 900
    first_time = page.locator("time.nudge-time").first
    assert first_time.inner_text().endswith(("EST", "EDT")), first_time.inner_text()
    assert first_time.get_attribute("title").endswith(" UTC")
    for chart in LANDING_CHARTS:
        svg = page.locator(f"svg#{chart}")
        expect(svg).to_be_visible()
        assert svg.get_attribute("data-drawn") == "yes", chart
        assert svg.bounding_box()["width"] > 400, chart
    spike = page.locator("svg#lookahead-telegram rect.bar").first
    assert spike.get_attribute("data-value") == str(SPIKE_TELEGRAM)
    # Drawn to scale: the bar's height is its share of the axis.
    y_max = float(page.locator("svg#lookahead-telegram").get_attribute("data-y-max"))
    assert float(spike.get_attribute("height")) == pytest.approx(SPIKE_TELEGRAM / y_max * 180, 0.01)
    page.locator("#panel-lookahead-telegram summary").click()
    expect(page.locator("#panel-lookahead-telegram table")).to_contain_text("1800")

    # Retry on a row that may have reached the user: a warning, and a second yes.
    page.goto(f"{base}{changelist}?state=failed")
    page.check(f"input[name=_selected_action][value='{interrupted_pk}']")
    page.select_option("select[name=action]", "retry_now")
    page.click("button[name=index]")
    expect(page.locator("#nudge-confirm-count")).to_contain_text(
        "1 row may already have reached the user"
    )
    expect(page.locator(".nudge-doubt")).to_contain_text("died mid-send")
    seen["retry-confirm"] = page.evaluate(LAYOUT_PROBLEMS, MIN_COLUMN)
    page.screenshot(path=str(ARTIFACTS / f"console-retry-confirm-{WIDE}.png"), full_page=True)
    page.set_viewport_size({"width": NARROW, "height": 900})
    page.screenshot(path=str(ARTIFACTS / f"console-retry-confirm-{NARROW}.png"), full_page=True)
    sideways_at_390["retry-confirm"] = page.evaluate(LAYOUT_PROBLEMS, MIN_COLUMN)["sideways"]
    page.click("input[type=submit][value='Yes, retry 1 row']")
    expect(page.locator("ul.messagelist")).to_contain_text("may already have reached the user")

    assert {name: found["cells"] for name, found in seen.items() if found["cells"]} == {}
    assert {name: found["sideways"] for name, found in seen.items() if found["sideways"]} == {}
    # On a phone the queue's wide tables scroll inside their box; the page itself does not.
    assert {name: px for name, px in sideways_at_390.items() if px} == {}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_charts_say_so_on_an_empty_queue(http_live_server, support):  # noqa: F811
    with open_page() as page:
        _empty_charts(page, http_live_server.url)


def _empty_charts(page, url: str) -> None:
    login(page, url, "support", PASSWORD)
    page.screenshot(path=str(ARTIFACTS / f"console-index-empty-{WIDE}.png"), full_page=True)

    for chart in LANDING_CHARTS:
        svg = page.locator(f"svg#{chart}")
        expect(svg).to_be_visible()
        assert svg.get_attribute("data-drawn") == "no", chart
        assert svg.bounding_box()["height"] > 100, chart
        expect(svg.locator("text.empty")).to_be_visible()
        assert svg.locator("rect.bar").count() == 0
    expect(page.locator("svg#lookahead-telegram text.empty")).to_have_text(
        "No nudges planned in the next 3 hours."
    )
    # The capacity line draws even with nothing planned: it is what a spike is read against.
    expect(page.locator("svg#lookahead-telegram polyline.line")).to_have_count(1)
    assert page.evaluate(LAYOUT_PROBLEMS, MIN_COLUMN) == {"cells": [], "sideways": 0}
