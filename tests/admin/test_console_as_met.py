"""Issue 24, "admin tables hide their key columns" and the console's small things, as
support meets them (the layout itself is checked in a browser: test_browser_walk.py)."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

from django.utils import timezone

from accounts.models import DeliverySettings
from console import charts, svgchart
from console.panels import look_ahead_panels, outcome_panels
from scheduled_sends.failures import FailureKind
from scheduled_sends.queue import transitions
from tenancy.scope import tenant_scope

from .conftest import reload
from .test_queue_admin import CHANGELIST, confirm_action, log_messages, run_action

CONFIG_ERROR = "[config] WhatsApp is not configured: TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN"


def _cells(response, column: str) -> list[str]:
    """The text of one column's cells, in the order of the list."""
    html = response.content.decode()
    return [
        unescape(re.sub(r"<[^>]+>", " ", cell)).split()
        for cell in re.findall(rf'<td class="field-{column}[^"]*">(.*?)</td>', html, re.S)
    ]


def test_retry_is_not_offered_for_a_configuration_failure(staff_client, make_user, make_send):
    """Issue 24: "Retry is offered on rows that failed for a configuration reason and will
    fail again" — refused with the reason, and the transition's fence holds too."""
    failed = make_send(
        make_user("alice"),
        fire_at=timezone.now() - timedelta(minutes=2),
        outcome="failed",
        attempts=1,
        failure_kind=FailureKind.CONFIGURATION,
        last_error=CONFIG_ERROR,
    )
    page = run_action(staff_client, "retry_now", [failed]).content.decode()
    assert "This will change none of the 1 row you selected." in page
    assert "failed for our channel configuration, and would fail again" in page
    confirm_action(staff_client, "retry_now", [failed])
    assert reload(failed).outcome == "failed"
    assert log_messages(failed) == []
    # The fence, for any other caller of the transition.
    assert transitions.retry_failed(failed.pk, timedelta(minutes=15)) is False


def test_a_sent_row_shows_the_try_that_sent_it(staff_client, make_user, make_send):
    """Issue 24, small things: "Attempts: 0" on a sent row."""
    now = timezone.now()
    alice = make_user("alice")
    make_send(alice, fire_at=now - timedelta(minutes=5), sent_at=now, outcome="sent")
    make_send(alice, fire_at=now - timedelta(minutes=9), sent_at=now, outcome="sent", attempts=2)
    response = staff_client.get(CHANGELIST + "?state=sent")
    assert sorted(_cells(response, "attempts_label")) == [["1"], ["3"]]


def test_a_pending_row_shows_the_users_channel_now(staff_client, make_user, make_send):
    """Issue 24: "Pending rows keep showing the old channel after the user's channel
    changed" — the list shows the channel the row will use, and the one it was queued for."""
    alice = make_user("alice", channel="whatsapp", whatsapp_number="+14155550100")
    pending = make_send(alice, fire_at=timezone.now() + timedelta(minutes=30), channel="whatsapp")
    with tenant_scope(alice.pk):
        DeliverySettings.objects.filter(user=alice).update(
            channel="telegram", telegram_chat_id="4242"
        )
    response = staff_client.get(CHANGELIST)
    [delivery] = _cells(response, "delivery")
    assert " ".join(delivery) == "Telegram (now; queued for WhatsApp)"
    assert reload(pending).channel == "whatsapp"  # the row itself is not rewritten


def test_the_follow_ups_list_shows_owner_due_and_state(staff_client, make_user, make_follow_up):
    """Issue 24: "Follow-ups list shows only ID and TITLE" — owner, due and state beside a
    title cut to a readable length."""
    alice = make_user("alice")
    make_follow_up(
        alice, "Renew the domain " + "x" * 300, due_at=timezone.now() - timedelta(hours=1)
    )
    response = staff_client.get("/admin/followups/followup/")
    html = response.content.decode()
    for column in ("title_short", "user", "due", "state"):
        assert f" column-{column}" in html, column
    assert _cells(response, "state") == [["past", "due"]]
    assert _cells(response, "user") == [["alice"]]
    [title] = _cells(response, "title_short")
    assert len(" ".join(title)) <= 80


def test_chart_text_is_drawn_at_a_size_that_stays_legible(db):
    """Issue 24: "At 390 px chart labels are ~5 px" — drawn at 13 units (9.6 px at a
    desktop chart's 560 px); the stylesheet enlarges it on phones (test_browser_walk.py)."""
    now = timezone.now()
    from core.config import NudgeConfig

    config = NudgeConfig.from_settings()
    svg = str(look_ahead_panels(charts.look_ahead(now, config), prefix="", one_user=False)[0].svg)
    assert f'font-size="{svgchart.FONT_SIZE}"' in svg
    assert svgchart.FONT_SIZE * 560 / svgchart.WIDTH >= 9
    # The last regular label no longer crowds "this hour".
    outcomes = str(outcome_panels(charts.outcomes(now, config), prefix="")[0].svg)
    assert ">-4h<" not in outcomes and ">this hour<" in outcomes
