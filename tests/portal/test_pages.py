"""The end-user pages through the test client: sign in, settings, follow-ups, calendars."""

from __future__ import annotations

import re
import zoneinfo
from datetime import time, timedelta

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection
from followups.models import FollowUp
from providers import crypto
from sweeps.sync_changed import run_sync_changed
from tenancy.scope import tenant_scope
from tests.fakes.google_server import FakeGoogle
from tests.security.test_signin_throttle import wait_for_mailers

from .conftest import PASSWORD, local_input, pending

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user_id=user.pk)


def test_login_url_is_a_real_page_and_calendar_connect_redirects_to_it(client, person):
    response = client.get(reverse("calendars:google_connect"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    assert client.get(response["Location"]).status_code == 200


def test_sign_in_then_first_visit_creates_settings_with_the_configured_lead(
    client, person, settings
):
    settings.NUDGE_DEFAULT_LEAD_MINUTES = 25
    user = person("ana")
    response = client.post(reverse("login"), {"username": "ana", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("portal:home")
    with tenant_scope(user.pk):
        assert not DeliverySettings.objects.filter(user_id=user.pk).exists()
    page = client.get(reverse("portal:home"))
    assert page.status_code == 200
    assert settings_of(user).default_lead_minutes == 25
    # The banner: not set up yet, and what this server offers (here: no chat channel).
    assert b'id="status-unlinked"' in page.content
    assert b"Nudges are not set up yet." in page.content


def test_wrong_password_stays_on_the_sign_in_page(client, person):
    person("ana")
    response = client.post(reverse("login"), {"username": "ana", "password": "nope"})
    assert response.status_code == 200
    assert b"correct username and password" in response.content


def test_sign_out_is_a_post(signed_in):
    _, client = signed_in("ana")
    response = client.post(reverse("logout"), {"next": reverse("login")})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert client.get(reverse("portal:home")).status_code == 302


@pytest.mark.django_db(transaction=True)  # the mail is sent by a thread after the commit
def test_password_reset_sends_a_working_link(client, person):
    person("ana")
    client.post(reverse("password_reset"), {"email": "ana@example.com"})
    wait_for_mailers()
    assert len(mail.outbox) == 1
    link = re.search(r"https?://\S+", mail.outbox[0].body).group(0)
    form_page = client.get(link, follow=True)
    assert b"Choose a new password" in form_page.content
    done = client.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": "a brand new passphrase 7", "new_password2": "a brand new passphrase 7"},
    )
    assert done.status_code == 302
    assert Client().login(username="ana", password="a brand new passphrase 7")


def test_a_follow_up_entered_in_the_users_zone_is_queued_at_once(signed_in):
    user, client = signed_in("ana")
    client.get(reverse("portal:home"))
    client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "Europe/Berlin", "default_lead_minutes": 10},
    )
    due = (timezone.now() + timedelta(minutes=12)).replace(second=0, microsecond=0)
    response = client.post(
        reverse("portal:home"), {"title": "Call the bank", "due_at": local_input(due, BERLIN)}
    )
    assert response.status_code == 302
    with tenant_scope(user.pk):
        follow_up = FollowUp.objects.get(user_id=user.pk)
    assert follow_up.due_at == due  # read in Berlin time, stored as the same instant
    [row] = pending(user)  # no sweep ran
    assert row.intended_at == row.fire_at == due - timedelta(minutes=10)
    home = client.get(reverse("portal:home")).content.decode()
    assert "Call the bank" in home
    assert f"{(due - timedelta(minutes=10)).astimezone(BERLIN):%H:%M}" in home


def test_a_follow_up_in_the_past_is_refused_with_a_message(signed_in):
    user, client = signed_in("ana")
    past = timezone.now() - timedelta(hours=1)
    response = client.post(
        reverse("portal:follow_ups"), {"title": "Too late", "due_at": local_input(past, BERLIN)}
    )
    assert response.status_code == 200
    assert b"That time has already passed" in response.content
    with tenant_scope(user.pk):
        assert not FollowUp.objects.filter(user_id=user.pk).exists()


def test_edit_complete_and_delete_keep_the_queue_in_step(signed_in):
    user, client = signed_in("ana")
    due = timezone.now() + timedelta(minutes=30)
    client.post(
        reverse("portal:follow_ups"),
        {"title": "Draft", "due_at": local_input(due, zoneinfo.ZoneInfo("UTC"))},
    )
    with tenant_scope(user.pk):
        follow_up = FollowUp.objects.get(user_id=user.pk)
    later = due + timedelta(minutes=20)
    client.post(
        reverse("portal:follow_up_edit", args=[follow_up.pk]),
        {"title": "Final", "due_at": local_input(later, zoneinfo.ZoneInfo("UTC"))},
    )
    [row] = pending(user)
    assert row.subject_starts_at == later.replace(second=0, microsecond=0)
    client.post(reverse("portal:follow_up_done", args=[follow_up.pk]), {"done": "1"})
    assert pending(user) == []
    client.post(reverse("portal:follow_up_done", args=[follow_up.pk]), {"done": "0"})
    assert len(pending(user)) == 1
    client.post(reverse("portal:follow_up_delete", args=[follow_up.pk]))
    assert pending(user) == []


def test_quiet_hours_and_pause_are_saved_and_applied_to_the_queue(signed_in):
    user, client = signed_in("ana")
    utc = zoneinfo.ZoneInfo("UTC")
    now = timezone.now().replace(second=0, microsecond=0)
    client.get(reverse("portal:home"))
    # "Pay rent" fires at +110 min, inside quiet hours +100..+115, and is due after them:
    # held to their end. "Stretch" fires at +103, is due at +113, before they end: it
    # keeps its time and delivery will skip it with the reason.
    rent_due, stretch_due = now + timedelta(minutes=120), now + timedelta(minutes=113)
    for title, due in (("Pay rent", rent_due), ("Stretch", stretch_due)):
        client.post(reverse("portal:follow_ups"), {"title": title, "due_at": local_input(due, utc)})
    quiet_start, quiet_end = now + timedelta(minutes=100), now + timedelta(minutes=115)
    response = client.post(
        reverse("portal:settings"),
        {
            "channel": "console",
            "timezone": "UTC",
            "default_lead_minutes": 10,
            "quiet_start": quiet_start.strftime("%H:%M"),
            "quiet_end": quiet_end.strftime("%H:%M"),
        },
    )
    assert response.status_code == 302
    saved = settings_of(user)
    assert (saved.quiet_start, saved.quiet_end) == (quiet_start.time(), quiet_end.time())
    intended = {row.subject_starts_at: row.intended_at for row in pending(user)}
    assert intended == {rent_due: quiet_end, stretch_due: stretch_due - timedelta(minutes=10)}

    client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "UTC", "default_lead_minutes": 10, "paused": "on"},
    )
    assert settings_of(user).paused and settings_of(user).paused_reason == "you paused nudges"
    assert pending(user) == []
    assert b"Nudges are paused: you paused nudges" in client.get(reverse("portal:home")).content


def test_half_given_quiet_hours_are_refused(signed_in):
    user, client = signed_in("ana")
    response = client.post(
        reverse("portal:settings"),
        {
            "channel": "console",
            "timezone": "UTC",
            "default_lead_minutes": 10,
            "quiet_start": "22:00",
        },
    )
    assert b"Give both ends of the quiet hours" in response.content
    assert settings_of(user).quiet_start is None


def test_choosing_telegram_before_linking_it_is_refused(signed_in):
    user, client = signed_in("ana")
    response = client.post(
        reverse("portal:settings"),
        {"channel": "telegram", "timezone": "UTC", "default_lead_minutes": 10},
    )
    assert b"Link Telegram first" in response.content
    assert settings_of(user).channel == "console"


def test_time_zone_is_a_picker_of_iana_zones(signed_in):
    _user, client = signed_in("ana")
    page = client.get(reverse("portal:settings")).content.decode()
    assert '<option value="Asia/Kolkata">' in page
    response = client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "Mars/Olympus_Mons", "default_lead_minutes": 10},
    )
    assert "That is not a time zone we know." in response.content.decode()


@pytest.fixture
def fake_google(settings):
    with FakeGoogle() as google:
        settings.GOOGLE_REVOKE_URL = google.revoke_url
        settings.CALENDAR_TOKEN_KEYS = ["YLAePgB6y1L4hT1hj7P9dFhuXp8nKrbuFfJgGvhNHGk="]
        yield google


def test_disconnecting_google_deletes_tokens_and_revokes_at_google(signed_in, fake_google):
    user, client = signed_in("ana")
    fake_google.refresh_tokens.add("1//refresh-abc")
    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.create(
            user=user,
            provider="google",
            account="ana@example.com",
            refresh_token_encrypted=crypto.encrypt("1//refresh-abc"),
            status="needs_reauth",
        )
    page = client.get(reverse("portal:calendars")).content.decode()
    assert "ana@example.com" in page and "Needs re-authorisation" in page
    response = client.post(reverse("portal:calendar_disconnect", args=[connection.pk]), follow=True)
    # The page answers without calling Google, and says when the grant goes.
    assert "revoked within a minute" in response.content.decode()
    assert "1//refresh-abc" in fake_google.refresh_tokens
    with tenant_scope(user.pk):
        assert not CalendarConnection.objects.filter(user_id=user.pk).exists()

    report = run_sync_changed(timezone.now())  # the minute job

    assert "1//refresh-abc" not in fake_google.refresh_tokens
    assert (report.released, report.revoked) == (1, 1)
    assert "disconnected calendars released 1 (grants revoked 1" in report.summary()
    assert run_sync_changed(timezone.now()).released == 0  # done once


def test_the_pages_need_a_session(client, db):
    for name in ("portal:home", "portal:follow_ups", "portal:settings", "portal:calendars"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_quiet_hours_time_is_stored_as_typed(signed_in):
    user, client = signed_in("ana")
    client.post(
        reverse("portal:settings"),
        {
            "channel": "console",
            "timezone": "Europe/Berlin",
            "default_lead_minutes": 5,
            "quiet_start": "22:30",
            "quiet_end": "06:45",
        },
    )
    saved = settings_of(user)
    assert (saved.timezone, saved.quiet_start, saved.quiet_end) == (
        "Europe/Berlin",
        time(22, 30),
        time(6, 45),
    )


def test_seed_demo_users_sign_in_with_the_printed_password_in_development(
    client, db, settings, capsys
):
    from django.core.management import call_command

    settings.DEBUG = True
    call_command("seed_demo", "--users", "2", "--prefix", "trial")
    out = capsys.readouterr().out
    password = re.search(r"with the password (\S+)", out).group(1)
    assert client.login(username="trial2", password=password)
    assert client.get(reverse("portal:home")).status_code == 200


def test_seed_demo_outside_development_makes_no_usable_password(client, db, settings, capsys):
    from django.core.management import call_command

    settings.DEBUG = False
    settings.EMBEDDED_DATABASE = False  # a real server, not the development default
    settings.ALLOW_CONSOLE_CHANNEL = False
    call_command("seed_demo", "--users", "1", "--prefix", "prod")
    assert "password" not in capsys.readouterr().out
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.get(username="prod1").has_usable_password()


def test_an_ics_address_on_a_private_network_is_refused_on_the_page(signed_in):
    user, client = signed_in("ana")
    response = client.post(
        reverse("portal:calendar_add_ics"), {"url": "http://127.0.0.1:8080/private.ics"}
    )
    assert response.status_code == 200
    assert b"errorlist" in response.content
    with tenant_scope(user.pk):
        assert not CalendarConnection.objects.filter(user_id=user.pk).exists()


def test_disconnecting_microsoft_deletes_its_tokens_and_events_leave_the_queue(signed_in):
    from calendars.models import CalendarEvent

    user, client = signed_in("ana")
    client.get(reverse("portal:home"))
    with tenant_scope(user.pk):
        connection = CalendarConnection.objects.create(
            user=user, provider="microsoft", account="ana@contoso.example"
        )
        CalendarEvent.objects.create(
            user=user,
            connection=connection,
            provider_event_id="evt-1",
            title="Board meeting",
            starts_at=timezone.now() + timedelta(minutes=45),
        )
    from sweeps.replan import refresh_queue

    refresh_queue(user.pk)
    assert len(pending(user)) == 1
    response = client.post(reverse("portal:calendar_disconnect", args=[connection.pk]), follow=True)
    assert "Microsoft offers no revocation" in response.content.decode()
    assert pending(user) == []


def test_the_console_channel_is_not_offered_once_a_real_channel_is_chosen(signed_in, settings):
    settings.DEBUG = False
    settings.EMBEDDED_DATABASE = False  # production: not the development default
    settings.ALLOW_CONSOLE_CHANNEL = False
    user, client = signed_in("ana")
    page = client.get(reverse("portal:settings")).content.decode()
    assert '<option value="console" selected>' in page  # an older account still on it
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(
            channel="telegram", telegram_chat_id="5550001"
        )
    assert 'value="console"' not in client.get(reverse("portal:settings")).content.decode()
    response = client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "UTC", "default_lead_minutes": 10},
    )
    assert "Pick how nudges reach you from the list." in response.content.decode()
    assert settings_of(user).channel == "telegram"


@pytest.mark.parametrize(
    ("language", "zone_words", "lead_words"),
    [
        ("en", "That is not a time zone we know.", "from 0 to 1440."),
        ("de", "Diese Zeitzone kennen wir nicht.", "zwischen 0 und 1440 an."),
        ("es", "No conocemos esa zona horaria.", "entre 0 y 1440."),
        ("fr", "Nous ne connaissons pas ce fuseau horaire.", "entre 0 et 1440."),
        ("pt_BR", "Não conhecemos esse fuso horário.", "entre 0 e 1440."),
    ],
)
def test_settings_errors_are_plain_words_in_the_persons_language(
    signed_in, language, zone_words, lead_words
):
    """issue 33: the Settings form answered an invalid zone or lead in Django's stock
    wording ("Select a valid choice. Mars/Olympus_Mons is not one of…")."""
    user, client = signed_in("ana")
    with tenant_scope(user.pk):
        DeliverySettings.objects.filter(user_id=user.pk).update(language=language)
    for lead in ("1441", "-5", "ten"):
        page = client.post(
            reverse("portal:settings"),
            {"channel": "console", "timezone": "Mars/Olympus_Mons", "default_lead_minutes": lead},
        ).content.decode()
        assert zone_words in page and lead_words in page, lead
        for stock in ("Select a valid choice", "is not one of", "Ensure this value", "Enter a"):
            assert stock not in page
    assert settings_of(user).timezone != "Mars/Olympus_Mons"


def test_the_edit_page_offers_no_add_it_due_buttons(signed_in):
    """issue 33: the Edit page offered the "Or add it due:" quick buttons, which belong
    to adding a follow-up, not to changing one; Home and Follow-ups keep them."""
    user, client = signed_in("ana")
    due = timezone.now() + timedelta(minutes=30)
    client.post(
        reverse("portal:follow_ups"),
        {"title": "Draft", "due_at": local_input(due, zoneinfo.ZoneInfo("UTC"))},
    )
    with tenant_scope(user.pk):
        follow_up = FollowUp.objects.get(user_id=user.pk)
    edit = client.get(reverse("portal:follow_up_edit", args=[follow_up.pk])).content.decode()
    assert "Or add it due:" not in edit and 'name="quick"' not in edit
    listing = client.get(reverse("portal:follow_ups")).content.decode()
    assert "Or add it due:" in listing and 'name="quick"' in listing


def test_the_linking_banner_points_to_what_the_server_offers(signed_in, settings):
    """issue 33: the "Link Telegram or WhatsApp" banner led to two "not available on this
    server" lines. It names only the channels this server offers, or says there is none."""
    settings.TELEGRAM_BOT_USERNAME = ""
    settings.TWILIO_ACCOUNT_SID = settings.TWILIO_AUTH_TOKEN = settings.TWILIO_WHATSAPP_FROM = ""
    _user, client = signed_in("ana")
    home = client.get(reverse("portal:home")).content.decode()
    assert "Link Telegram or WhatsApp" not in home
    assert "This server has no chat channel set up yet" in home

    settings.TELEGRAM_BOT_USERNAME = "nudge_bot"
    home = client.get(reverse("portal:home")).content.decode()
    banner = home.split('id="status-unlinked"', 1)[1].split("</p>", 1)[0]
    assert "Link Telegram" in banner and "WhatsApp" not in banner


def test_a_nudge_a_day_ahead_says_the_day_its_follow_up_is_due(signed_in):
    """Upcoming read "Sun 6 Dec, 16:55 — Report (follow-up at 16:55)" for a follow-up due
    Monday with a one-day reminder, as if due that Sunday: its day is said when it is not
    the nudge's; the same day keeps the short form."""
    user, client = signed_in("ana")
    client.post(
        reverse("portal:settings"),
        {"channel": "console", "timezone": "Europe/Berlin", "default_lead_minutes": 10},
    )
    due = (timezone.now() + timedelta(days=1, minutes=20)).replace(second=0, microsecond=0)
    fields = {"title": "Report", "due_at": local_input(due, BERLIN)}
    client.post(reverse("portal:home"), {**fields, "reminder_minutes": ["1440", "0"]})
    page = client.get(reverse("portal:home")).content.decode()
    upcoming = page[page.index('id="upcoming"') : page.index("</section>", page.index("upcoming"))]
    local = due.astimezone(BERLIN)
    assert f"(follow-up on {local:%a} {local.day} {local:%b} at {local:%H:%M})" in upcoming
    assert f"(follow-up at {local:%H:%M})" not in upcoming

    with tenant_scope(user.pk):
        FollowUp.objects.all().delete()
    soon = (timezone.now() + timedelta(minutes=40)).replace(second=0, microsecond=0)
    client.post(reverse("portal:home"), {**fields, "due_at": local_input(soon, BERLIN)})
    page = client.get(reverse("portal:home")).content.decode()
    local = soon.astimezone(BERLIN)
    if local.date() == (soon - timedelta(minutes=10)).astimezone(BERLIN).date():
        assert f"(follow-up at {local:%H:%M})" in page


def test_each_chosen_caldav_calendar_is_named_on_the_page(signed_in):
    """Two calendars of one iCloud account: the page, the switch's answer and the
    disconnect question say which is which."""
    user, client = signed_in("ana")
    client.get(reverse("portal:home"))
    with tenant_scope(user.pk):
        work, family = (
            CalendarConnection.objects.create(
                user=user,
                provider="caldav",
                account="ana@icloud.example",
                calendar_id=f"/ana/{name.lower()}/",
                sync_state={"name": name},
            )
            for name in ("Work", "Family")
        )

    page = client.get(reverse("portal:calendars")).content.decode()
    asked = client.get(reverse("portal:calendar_disconnect", args=[family.pk])).content.decode()
    switched = client.post(
        reverse("portal:calendar_switches", args=[work.pk]), {"skip_all_day": "on"}, follow=True
    ).content.decode()

    assert "ana@icloud.example — Work" in page and "ana@icloud.example — Family" in page
    assert "Family" in asked and "Work" not in asked
    assert "Nudges for CalDAV ana@icloud.example — Work are off." in switched


def test_a_first_fetch_that_must_wait_is_not_called_a_bad_address(signed_in):
    """A feed whose server was busy (503, retried later) or a Google calendar refused once
    is not "check the address and add it again"; a feed that answered nonsense is."""
    user, client = signed_in("ana")
    client.get(reverse("portal:home"))
    later = timezone.now() + timedelta(minutes=5)
    with tenant_scope(user.pk):
        for provider, account, retry_after in (
            ("ics", "busy.example", later),
            ("google", "ana@gmail.example", None),
            ("ics", "broken.example", None),
        ):
            CalendarConnection.objects.create(
                user=user,
                provider=provider,
                account=account,
                status="error",
                last_error="failed",
                retry_after=retry_after,
            )

    page = client.get(reverse("portal:calendars")).content.decode()

    rows = {a: page.split(a, 1)[1].split("</li>", 1)[0] for a in ("busy", "ana@gmail", "broken")}
    assert "check the address" not in rows["busy"] and "Last sync failed" in rows["busy"]
    assert "check the address" not in rows["ana@gmail"]
    assert "Could not be read" in rows["broken"] and "check the address" in rows["broken"]
