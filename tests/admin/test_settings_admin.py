"""Per-user delivery settings: editable by support, never stored invalid."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from followups.actions import create_follow_up
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user=user)


def change_url(user) -> str:
    return reverse("admin:accounts_deliverysettings_change", args=[settings_of(user).pk])


def form_data(**overrides) -> dict:
    return {
        "enabled": "on",
        "channel": "console",
        "whatsapp_number": "",  # support cannot set an address (issue 23)
        "telegram_chat_id": "",
        "timezone": "Europe/Berlin",
        "default_lead_minutes": "30",
        **overrides,
    }


def test_valid_change_is_stored(staff_client, make_user):
    alice = make_user("alice")

    response = staff_client.post(change_url(alice), form_data())

    assert response.status_code == 302
    stored = settings_of(alice)
    assert (stored.channel, stored.timezone) == ("console", "Europe/Berlin")
    assert stored.default_lead_minutes == 30


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("whatsapp_number", "004915112345678", "Enter the number in E.164 form"),
        ("whatsapp_number", "+49 151 1234 5678", "Enter the number in E.164 form"),
        ("timezone", "Mars/Olympus_Mons", "is not an IANA time zone"),
        ("timezone", "posix/Europe/Berlin", "is not an IANA time zone"),
        ("default_lead_minutes", "1441", "between 0 and 1440 minutes (24 hours)"),
        ("default_lead_minutes", "-1", "between 0 and 1440 minutes (24 hours)"),
        ("telegram_chat_id", "not a chat", "A Telegram chat id is a number"),
    ],
)
def test_invalid_values_show_a_clear_message_and_store_nothing(
    staff_client, make_user, field, value, message
):
    alice = make_user("alice")
    before = settings_of(alice)

    response = staff_client.post(change_url(alice), form_data(**{field: value}))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [field]
    assert message in errors[field][0]
    assert message in response.content.decode().replace("&#x27;", "'")
    after = settings_of(alice)
    assert (after.channel, after.timezone, after.default_lead_minutes) == (
        before.channel,
        before.timezone,
        before.default_lead_minutes,
    )


def test_channel_needs_its_address(staff_client, make_user):
    alice = make_user("alice")

    response = staff_client.post(change_url(alice), form_data(channel="whatsapp"))

    assert response.status_code == 200
    assert "WhatsApp delivery needs a number." in response.content.decode()
    assert settings_of(alice).channel == "console"


def test_settings_list_shows_every_tenant(staff_client, make_user):
    make_user("alice")
    make_user("bob")

    response = staff_client.get(reverse("admin:accounts_deliverysettings_changelist"))

    assert response.context["cl"].result_count == 2


def test_support_edit_requeues_the_user_at_once(
    staff_client, make_user, django_capture_on_commit_callbacks
):
    """Support's change of the lead moves the user's queued nudge without waiting
    for the next sweep: the admin saves through ``accounts.actions.update_settings``,
    which re-materializes the user once the request's transaction commits."""
    alice = make_user("alice")
    due_at = timezone.now() + timedelta(hours=2)
    create_follow_up(
        alice.pk, "Send the contract", due_at, timezone.now(), NudgeConfig.from_settings()
    )
    with tenant_scope(alice.pk):
        lead = DeliverySettings.objects.get(user=alice).default_lead_minutes
        queued = list(ScheduledSend.objects.filter(user_id=alice.pk).values_list("intended_at"))
    assert queued == [(due_at - timedelta(minutes=lead),)]

    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            change_url(alice),
            form_data(channel="console", whatsapp_number="", default_lead_minutes="45"),
        )

    assert response.status_code == 302
    with tenant_scope(alice.pk):
        queued = list(ScheduledSend.objects.filter(user_id=alice.pk).values_list("intended_at"))
    assert queued == [(due_at - timedelta(minutes=45),)]


def test_add_page_answers_and_creates_the_row(staff_client, support_user):
    """issue 33: Delivery settings → Add (and "Save and add another") answered 500
    because ``capped_nudges`` had only a database default."""
    add_url = reverse("admin:accounts_deliverysettings_add")
    assert staff_client.get(add_url).status_code == 200

    owner = support_user.__class__.objects.create_user("carol", "carol@example.com", "x")
    data = form_data(user=str(owner.pk), _addanother="1")
    response = staff_client.post(add_url, data)

    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"].endswith(add_url)
    stored = settings_of(owner)
    assert (stored.timezone, stored.default_lead_minutes, stored.capped_nudges) == (
        "Europe/Berlin",
        30,
        0,
    )
