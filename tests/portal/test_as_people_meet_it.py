"""Issue 24, the user area "as people meet it": sentences rather than internals, no
dead ends, times shown rightly, and the small things. Each test names its bullet."""

from __future__ import annotations

import re
from datetime import time, timedelta

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from console import charts
from core.config import NudgeConfig
from followups import actions as followups
from messaging.addresses import parse_telegram_payload, use_telegram_code
from portal.forms import IcsFeedForm, SettingsForm
from portal.models import ApiToken
from scheduled_sends.failures import FailureKind
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from tenancy.scope import support_scope, tenant_scope
from tests.support.queue import settle_one

from .conftest import PASSWORD, pending

RAW_CONFIG_ERROR = (
    "[config] WhatsApp is not configured: TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, "
    "TWILIO_WHATSAPP_FROM"
)


def enqueue_one(user, at, ref_id: int = 999_001) -> int:
    """One of the user's nudges queued for ``at`` (its subject need not exist); its id."""
    with tenant_scope(user.pk):
        transitions.enqueue(
            user.pk, "console", [transitions.NewNudge("follow_up", ref_id, at, at, 0)]
        )
        return ScheduledSend.objects.get(user_id=user.pk, ref_id=ref_id).pk


def queue_one(user, at, ref_id: int = 999_001) -> transitions.ClaimedSend:
    """One of the user's nudges, queued and claimed at ``at``."""
    enqueue_one(user, at, ref_id)
    [row] = [
        r for r in transitions.claim_due(at, NudgeConfig.from_settings()) if r.ref_id == ref_id
    ]
    return row


def skipped_by(user, reason: str, ref_id: int) -> None:
    """A pending nudge settled ``skipped`` with ``reason`` (as support's action does)."""
    row_id = enqueue_one(user, timezone.now() + timedelta(minutes=30), ref_id)
    with support_scope():
        assert transitions.skip_unsent(row_id, reason, timedelta(minutes=5))


def test_history_says_why_in_sentences_never_the_recorded_error(signed_in):
    """Users see sentences, never internals: a failure for a configuration reason and
    support's skip reason appear as plain words with a "what you can do" link."""
    user, client = signed_in("ana")
    now = timezone.now().replace(microsecond=0)
    failed = queue_one(user, now - timedelta(minutes=5), ref_id=999_001)
    assert settle_one(
        failed,
        transitions.Transition.FAILED,
        now - timedelta(minutes=5),
        failure_kind=FailureKind.CONFIGURATION,
        reason=RAW_CONFIG_ERROR,
    )
    skipped_by(user, "skipped by support: customer 4411 asked on the phone", 999_002)

    page = client.get(reverse("portal:home")).content.decode()
    assert "TWILIO" not in page and "[config]" not in page
    assert "customer 4411" not in page and "skipped by support" not in page
    assert "This server could not send it" in page
    assert "Our support team cancelled this nudge." in page
    history = page[page.index('id="history"') :]
    assert f'href="{reverse("portal:settings")}"' in history  # what you can do


def test_form_errors_are_sentences(signed_in, twilio_settings):
    """Users see sentences, never internals: "due_at is in the past" becomes "That time
    has already passed", "E.164 form" an example number, and the ICS refusal a sentence."""
    twilio_settings.TWILIO_CONFIRM_CONTENT_SID = "HX" + "0" * 32
    _, client = signed_in("ana")
    past = (timezone.now() - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    page = client.post(reverse("portal:follow_ups"), {"title": "Call", "due_at": past})
    text = page.content.decode()
    assert "That time has already passed" in text and "due_at is in the past" not in text

    page = client.post(reverse("portal:whatsapp_number"), {"number": "0151 1234"})
    text = page.content.decode()
    assert "E.164" not in text and "+44 7700 900123" in text

    page = client.post(reverse("portal:calendar_add_ics"), {"url": "http://127.0.0.1/x.ics"})
    text = page.content.decode()
    assert "This address cannot be used" in text
    assert "private" not in text and "resolves" not in text


def test_history_pills_wrap_on_a_phone(signed_in):
    """Users see sentences, never internals: pills wrap (no nowrap pill holding a
    whole reason that would widen a 390 px page)."""
    user, client = signed_in("ana")
    now = timezone.now().replace(microsecond=0)
    failed = queue_one(user, now - timedelta(minutes=5))
    settle_one(
        failed,
        transitions.Transition.FAILED,
        now - timedelta(minutes=5),
        failure_kind=FailureKind.CONFIGURATION,
        reason=RAW_CONFIG_ERROR,
    )
    page = client.get(reverse("portal:home")).content.decode()
    pills = re.findall(r'<span class="tag[^"]*">([^<]*)</span>', page)
    assert pills == ["failed"]  # the pill holds a word; the sentence is beside it
    assert "white-space:nowrap}" not in page.split(".tag{", 1)[1].split("}", 1)[0] + "}"


def test_google_and_microsoft_without_credentials_say_so_inline(signed_in, settings):
    """Dead ends: on a server without credentials the calendars page says "not available
    on this server" and an old link leads back to it, not to a bare 503."""
    settings.GOOGLE_CLIENT_ID = ""
    settings.MICROSOFT_CLIENT_ID = ""
    _, client = signed_in("ana")
    page = client.get(reverse("portal:calendars")).content.decode()
    assert "Google Calendar is not available on this server" in page
    assert "Microsoft 365 is not available on this server" in page
    assert reverse("calendars:google_connect") not in page
    response = client.get(reverse("calendars:google_connect"), follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("portal:calendars")
    assert "Google Calendar is not available on this server." in response.content.decode()


def test_a_webcal_address_is_read_as_https():
    """Dead ends: ``webcal://`` (what Apple and many sites publish) is accepted, as https."""
    form = IcsFeedForm({"url": "webcal://p01-calendars.icloud.com/published/2/abc"})
    assert form.is_valid(), form.errors
    assert form.cleaned_data["url"] == "https://p01-calendars.icloud.com/published/2/abc"


def test_whatsapp_says_not_available_before_a_number_is_typed(signed_in, settings):
    """Dead ends: WhatsApp says it is not available before the user types a number."""
    settings.TWILIO_ACCOUNT_SID = ""
    _, client = signed_in("ana")
    page = client.get(reverse("portal:settings")).content.decode()
    assert "WhatsApp is not available on this server." in page
    assert 'name="number"' not in page


def test_link_telegram_waits_with_a_qr_code_then_moves_on(signed_in, bot):
    """Dead ends: "Link Telegram" shows a waiting state, the link as a QR code for a
    desktop, and a check that turns to "linked" once the bot has the code."""
    user, client = signed_in("ana")
    page = client.post(reverse("portal:link_telegram"))
    text = page.content.decode()
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    assert "Waiting for Telegram" in text
    assert 'src="data:image/svg+xml' in text  # the QR code, drawn on the server
    code = re.search(r"start=([^\"&]+)", text).group(1)
    state = reverse("portal:telegram_link_state")
    assert client.get(state).json() == {"state": "waiting"}
    owned = parse_telegram_payload(code)
    with tenant_scope(user.pk):
        assert use_telegram_code(owned, timezone.now())
    assert client.get(state).json() == {"state": "linked"}


def test_the_account_page_changes_e_mail_and_password_in_the_user_area(signed_in):
    """Dead ends: an account page in the user area (e-mail, password change)."""
    user, client = signed_in("ana")
    page = client.get(reverse("portal:account"))
    assert page.status_code == 200 and b"ana@example.com" in page.content
    assert b'aria-label="Main"' in page.content  # the user area's navigation, not the admin
    asked = client.post(
        reverse("portal:account"),
        {"change": "email", "email": "ana@example.org", "password": PASSWORD},
        follow=True,
    )
    assert b"Check the inbox of ana@example.org" in asked.content
    user.refresh_from_db()
    # Only the link mailed to the new address changes it (issue 34 finding 2:
    # tests/security/test_email_change.py).
    assert user.email == "ana@example.com"
    response = client.post(
        reverse("portal:account"),
        {
            "change": "password",
            "old_password": PASSWORD,
            "new_password1": "another long passphrase 9",
            "new_password2": "another long passphrase 9",
        },
        follow=True,
    )
    assert b"Password changed" in response.content
    user.refresh_from_db()
    assert user.check_password("another long passphrase 9")
    assert client.get(reverse("portal:home")).status_code == 200  # still signed in


def test_a_follow_up_due_sooner_than_the_lead_shows_its_nudge_as_now(signed_in):
    """Time shown rightly: a follow-up due sooner than the lead shows its nudge as
    "now", not as a time already past."""
    user, client = signed_in("ana")
    now = timezone.now()
    due = now + timedelta(minutes=3)  # the lead is 10 minutes
    followups.create_follow_up(user.pk, "Call back", due, now, NudgeConfig.from_settings())
    [row] = pending(user)
    assert row.fire_at < timezone.now()
    page = client.get(reverse("portal:home")).content.decode()
    upcoming = page[page.index('id="upcoming"') : page.index("</section>", page.index("upcoming"))]
    assert '<span class="when">now</span>' in upcoming
    assert f"{timezone.localtime(row.fire_at):%H:%M}</span>" not in upcoming


def test_history_shows_when_it_was_sent(signed_in):
    """Time shown rightly: History shows when a nudge was sent, not the planned time."""
    user, client = signed_in("ana")
    planned = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=3)
    sent_at = planned + timedelta(minutes=47)
    row = queue_one(user, planned)
    assert settle_one(row, transitions.Transition.SENT, sent_at)
    page = client.get(reverse("portal:home")).content.decode()
    history = page[page.index('id="history"') :]
    assert f"{sent_at:%H:%M}</span>" in history  # the user's zone is UTC
    assert f"{planned:%H:%M}</span>" not in history


def test_far_off_dates_show_the_year(signed_in):
    """Time shown rightly: far-off dates show the year."""
    user, client = signed_in("ana")
    now = timezone.now()
    due = now.replace(year=now.year + 1, month=3, day=1, hour=9, minute=0)
    followups.create_follow_up(user.pk, "Renew passport", due, now, NudgeConfig.from_settings())
    page = client.get(reverse("portal:follow_ups")).content.decode()
    assert f"1 Mar {now.year + 1}, 09:00" in page


def test_quiet_hours_are_shown_and_typed_in_24_hour_style(signed_in):
    """Time shown rightly: quiet hours in the app's 24-hour style (not a browser's
    locale time picker, which shows "10:00 PM")."""
    user, client = signed_in("ana")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            quiet_start=time(22, 0), quiet_end=time(7, 0)
        )
    page = client.get(reverse("portal:settings")).content.decode()
    field = re.search(r"<input[^>]*id=\"id_quiet_start\"[^>]*>", page).group(0)
    assert 'type="text"' in field and 'value="22:00"' in field
    assert 'type="time"' not in page


def test_quiet_hours_with_equal_ends_are_refused_with_a_sentence():
    """Time shown rightly: 22:00-22:00 quiet hours are refused with a sentence."""
    form = SettingsForm(
        {
            "channel": "console",
            "timezone": "UTC",
            "default_lead_minutes": "10",
            "quiet_start": "22:00",
            "quiet_end": "22:00",
        },
        delivery=DeliverySettings(channel="console"),
    )
    assert not form.is_valid()
    assert "end different from their start" in " ".join(form.non_field_errors())


def test_the_edit_form_shows_every_error_at_once(signed_in):
    """Small things: the follow-up edit form shows all its errors at once."""
    user, client = signed_in("ana")
    now = timezone.now()
    item = followups.create_follow_up(
        user.pk, "Call", now + timedelta(days=1), now, NudgeConfig.from_settings()
    )
    past = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    page = client.post(
        reverse("portal:follow_up_edit", args=[item.pk]), {"title": "x" * 250, "due_at": past}
    ).content.decode()
    assert "That time has already passed" in page
    assert "keep it to 200" in page


def test_a_long_paste_is_refused_with_a_sentence_never_cut(signed_in):
    """Small things: a 2,000-character paste is refused with a sentence (and the limit
    shown), never cut silently by the page."""
    user, client = signed_in("ana")
    page = client.get(reverse("portal:follow_ups")).content.decode()
    title_input = re.search(r"<input[^>]*name=\"title\"[^>]*>", page).group(0)
    assert "maxlength" not in title_input
    assert "Up to 200 characters." in page
    due = (timezone.now() + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    page = client.post(reverse("portal:follow_ups"), {"title": "y" * 2000, "due_at": due})
    assert "That is 2000 characters; keep it to 200 or fewer." in page.content.decode()
    assert followups.list_follow_ups(user.pk) == []


def test_delete_asks_first_names_the_item_and_says_what_happened(signed_in):
    """Small things: delete asks to confirm, names the item, and says what happened."""
    user, client = signed_in("ana")
    now = timezone.now()
    item = followups.create_follow_up(
        user.pk, "Water the plants", now + timedelta(days=1), now, NudgeConfig.from_settings()
    )
    url = reverse("portal:follow_up_delete", args=[item.pk])
    ask = client.get(url).content.decode()
    assert "Delete “Water the plants”?" in ask
    assert followups.get_follow_up(user.pk, item.pk) is not None
    done = client.post(url, follow=True).content.decode()
    assert "Deleted “Water the plants”" in done
    assert followups.get_follow_up(user.pk, item.pk) is None


def test_revoke_asks_first_names_the_token_and_says_what_happened(signed_in):
    """Small things: revoke asks to confirm, names the token, and says what happened."""
    user, client = signed_in("ana")
    client.post(reverse("portal:api_token_create"), {"name": "shop backend", "expires_in": ""})
    with tenant_scope(user.pk):
        token = ApiToken.objects.get(user_id=user.pk)
    url = reverse("portal:api_token_revoke", args=[token.pk])
    assert "Revoke the token “shop backend”" in client.get(url).content.decode()
    with tenant_scope(user.pk):
        assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    done = client.post(url, follow=True).content.decode()
    assert "Revoked the token “shop backend”" in done


def test_the_token_page_does_not_make_a_second_token_on_refresh(signed_in):
    """Small things: the token page does not re-submit on refresh (post, redirect, get;
    the token shown once) and has a copy button."""
    user, client = signed_in("ana")
    response = client.post(reverse("portal:api_token_create"), {"name": "ci", "expires_in": ""})
    assert response.status_code == 302
    shown = client.get(response["Location"])
    text = shown.content.decode()
    assert shown["Cache-Control"] == "no-store"
    assert re.search(r"nudge_\d+_\S+</code>", text) and 'id="copy-token"' in text
    again = client.get(response["Location"])  # the refresh
    assert again.status_code == 302 and again["Location"] == reverse("portal:settings")
    with tenant_scope(user.pk):
        assert ApiToken.objects.filter(user_id=user.pk).count() == 1


def test_time_zones_are_canonical_names_only():
    """Small things: time zones are the canonical ones, without aliases."""
    values = {value for value, _ in SettingsForm().fields["timezone"].choices}
    assert {"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"} <= values
    assert not values & {"US/Eastern", "Asia/Calcutta", "Europe/Belfast", "GB", "Etc/GMT+5"}
    # An account that already chose an alias keeps it listed, so its form still saves.
    kept = (
        SettingsForm(delivery=DeliverySettings(timezone="Asia/Calcutta")).fields["timezone"].choices
    )
    assert ("Asia/Calcutta", "Asia/Calcutta") in kept


def test_signing_out_says_so(signed_in):
    """Small things: a sign-out message."""
    _, client = signed_in("ana")
    page = client.post(reverse("logout"), {"next": reverse("login")}, follow=True)
    assert "You are signed out." in page.content.decode()


def test_the_site_has_a_favicon(client, db):
    """Small things: a favicon."""
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/svg+xml"
    assert b'rel="icon"' in client.get(reverse("login")).content


def test_whatsapp_is_spelled_whatsapp_in_history(signed_in):
    """Small things: "WhatsApp" spelling (a skip recorded as "whatsapp unreachable")."""
    user, client = signed_in("ana")
    skipped_by(user, "whatsapp unreachable: 63016", 999_003)
    page = client.get(reverse("portal:home")).content.decode()
    assert "WhatsApp could not reach you." in page
    assert "whatsapp unreachable" not in page and "Whatsapp" not in page


@pytest.mark.parametrize("path", ["/api/follow-ups/abc", "/api/nothing-here"])
def test_an_unknown_api_address_answers_json_404(client, db, path):
    """Small things: ``GET /api/follow-ups/abc`` answers a JSON 404."""
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "error" in response.json()


def test_the_user_pages_need_no_admin_password_page(signed_in):
    """Dead ends: the user area links its own account page, not the admin's."""
    _, client = signed_in("ana")
    page = client.get(reverse("portal:home")).content.decode()
    assert f'href="{reverse("portal:account")}"' in page
    assert "/accounts/password_change/" not in page
    assert django_settings.LOGIN_REDIRECT_URL == "portal:home"


def test_a_follow_up_due_sooner_than_the_lead_is_not_counted_late(signed_in):
    """Time shown rightly: a follow-up due sooner than the lead is not counted late —
    lateness runs from when its nudge was queued, not from a time before that
    (in the deliver run's figures and in the console's lateness chart)."""
    user, _ = signed_in("ana")
    now = timezone.now()
    followups.create_follow_up(
        user.pk, "Call back", now + timedelta(minutes=3), now, NudgeConfig.from_settings()
    )
    report = run_deliver(timezone.now() + timedelta(seconds=20))
    assert report.sent == 1, report.summary()
    [late] = report.latenesses
    assert late < 60  # not the 7 minutes since "due - lead"
    with tenant_scope(user.pk):
        figures = charts.lateness(timezone.now(), NudgeConfig.from_settings(), user.pk)
    assert figures.sent == 1
    assert max(q.max for q in figures.by_quarter.values()) < 60


def test_a_new_account_is_offered_its_devices_zone(signed_in):
    """Small things: browser detection as the default — Home offers a new account (still
    on UTC) the zone its browser reports, stored by its canonical name."""
    user, client = signed_in("ana")
    assert 'id="zone-offer"' in client.get(reverse("portal:home")).content.decode()
    client.post(reverse("portal:use_device_zone"), {"timezone": "Asia/Calcutta"})
    with tenant_scope(user.pk):
        assert DeliverySettings.objects.get(user_id=user.pk).timezone == "Asia/Kolkata"
    assert 'id="zone-offer"' not in client.get(reverse("portal:home")).content.decode()
    response = client.post(reverse("portal:use_device_zone"), {"timezone": "Mars/Olympus"})
    assert response["Location"] == reverse("portal:settings")


def test_a_broken_calendar_connect_ends_on_a_page_with_a_way_back(signed_in):
    """Dead ends: the end of a Google or Microsoft connect (here an expired sign-in link)
    is a page of the user area with a way back to Calendars, not bare text."""
    _, client = signed_in("ana")
    response = client.get(reverse("calendars:google_callback"), {"state": "stale", "code": "x"})
    assert response.status_code == 400
    text = response.content.decode()
    assert "invalid or has expired" in text
    assert f'href="{reverse("portal:calendars")}"' in text and 'aria-label="Main"' in text


def test_the_old_password_change_address_leads_to_the_account_page(signed_in):
    """Dead ends: ``/accounts/password_change/`` (the admin-styled form) leads to the
    account page of the user area."""
    _, client = signed_in("ana")
    response = client.get("/accounts/password_change/")
    assert response.status_code == 302 and response["Location"] == reverse("portal:account")


def test_no_user_form_cuts_a_long_paste_in_the_page(signed_in):
    """Small things: a long paste is never cut silently — no field of the user pages
    carries a ``maxlength`` the browser would enforce without a word."""
    _, client = signed_in("ana")
    for name in ("portal:home", "portal:follow_ups", "portal:settings", "portal:calendars"):
        page = client.get(reverse(name)).content.decode()
        assert "maxlength" not in page, name
    page = client.post(reverse("portal:api_token_create"), {"name": "n" * 300, "expires_in": ""})
    assert "Keep the name to 80 characters or fewer." in page.content.decode()


def test_quick_choices_are_written_on_a_12_hour_clock(signed_in):
    """issue 33: quick choices read "Tomorrow 9:00" for a person on a 12-hour clock."""
    user, client = signed_in("ana")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(clock="12h")
    page = client.get(reverse("portal:follow_ups")).content.decode()
    assert 'value="tomorrow_morning">Tomorrow 9:00 AM</button>' in page
    assert 'value="monday_morning">Monday 9:00 AM</button>' in page
    assert "Tomorrow 9:00<" not in page

    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(clock="24h")
    page = client.get(reverse("portal:follow_ups")).content.decode()
    assert 'value="tomorrow_morning">Tomorrow 9:00</button>' in page


def test_quiet_hours_accept_either_clock_and_say_so(signed_in):
    """issue 33: quiet hours demanded "a 24-hour time"; "9:00 pm" and "21:00" are both
    taken, and the page and its refusal say so in plain words."""
    user, client = signed_in("ana")
    data = {"channel": "console", "timezone": "UTC", "default_lead_minutes": "10"}
    for start, end in (("9:00 pm", "7:00 am"), ("21:00", "07:00"), ("9pm", "7 a.m.")):
        response = client.post(
            reverse("portal:settings"), {**data, "quiet_start": start, "quiet_end": end}
        )
        assert response.status_code == 302, (start, end)
        with tenant_scope(user.pk):
            stored = DeliverySettings.objects.get(user_id=user.pk)
        assert (stored.quiet_start, stored.quiet_end) == (time(21, 0), time(7, 0))

    page = client.get(reverse("portal:settings")).content.decode()
    assert "such as 22:00 or 10:00 pm" in page

    page = client.post(
        reverse("portal:settings"), {**data, "quiet_start": "25:00", "quiet_end": "7:00 am"}
    ).content.decode()
    assert "Give a time such as 22:00 or 10:00 pm." in page
    assert "Give a 24-hour time" not in page

    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(clock="12h")
    page = client.get(reverse("portal:settings")).content.decode()
    field = re.search(r"<input[^>]*id=\"id_quiet_start\"[^>]*>", page).group(0)
    assert 'value="09:00 PM"' in field


def test_a_far_future_date_is_refused_and_the_confirmation_says_the_year(signed_in):
    """issue 33: year 2999 was accepted silently, and the confirmation dropped the year."""
    now = timezone.now()
    # The one rule (website, API and chat): more than 5 years ahead is refused.
    with pytest.raises(followups.FollowUpInvalid, match="too far ahead"):
        followups.clean_due(now.replace(year=2999, month=1, day=1), now)
    in_four_years = now + timedelta(days=4 * 365)
    assert followups.clean_due(in_four_years, now) == in_four_years

    _user, client = signed_in("ana")
    page = client.post(
        reverse("portal:follow_ups"), {"title": "Typo", "due_at": "2999-03-01T09:00"}
    ).content.decode()
    assert "That is more than 5 years ahead. Check the year" in page
    assert "Typo" not in client.get(reverse("portal:follow_ups")).content.decode()

    next_year = now.replace(year=now.year + 1, month=3, day=1, hour=9, minute=0)
    response = client.post(
        reverse("portal:follow_ups"),
        {"title": "Renew", "due_at": next_year.strftime("%Y-%m-%dT%H:%M")},
        follow=True,
    )
    said = response.content.decode()
    assert re.search(rf"Added “Renew”, due \w+ 1 Mar {now.year + 1}, 09:00\.", said)

    soon = now + timedelta(hours=2)
    response = client.post(
        reverse("portal:follow_ups"),
        {"title": "Soon", "due_at": soon.strftime("%Y-%m-%dT%H:%M")},
        follow=True,
    )
    said = response.content.decode()
    shown_year = str(soon.year)
    added = re.search(r"Added “Soon”, due ([^<]*)\.", said).group(1)
    assert (shown_year in added) == (soon.year != now.year), added
