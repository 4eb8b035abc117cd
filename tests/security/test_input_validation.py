"""Bad phone numbers, time zones and leads are refused at the edge, with a clear message,
and never stored; the lead's check constraint holds even when validation is skipped."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection

from accounts.admin import DeliverySettingsForm
from accounts.models import DeliverySettings
from core.config import SCHEMA_MAX_LEAD_MINUTES
from tenancy.scope import tenant_scope

pytestmark = pytest.mark.django_db

BAD_NUMBERS = [
    "4155550100",  # no '+'
    "+1 415 555 0100",  # spaces
    "+1-415-555-0100",
    "+0123456789",  # no country code starts with 0
    "+12345",  # too short
    "+1234567890123456",  # 16 digits: too long for E.164
    "whatsapp:+14155550100",
    "+1415555010O",  # letter O
    "'; DROP TABLE delivery_settings; --",
]
# Python's \d and $ are generous: digits of any script, and a newline before the end.
UNICODE_DIGIT_NUMBERS = [
    "+1" + "".join(chr(0x0660 + int(d)) for d in "4155550100"),  # Arabic-Indic digits
    "+1" + "".join(chr(0xFF10 + int(d)) for d in "4155550100"),  # fullwidth digits
    "+14155550100\n",
]
BAD_ZONES = ["Mars/Olympus_Mons", "Europe/Berlin ", "../../etc/passwd", "/etc/localtime", ""]
LENIENT_ZONES = ["posix/Europe/Berlin", "right/UTC"]  # zone files, not IANA names
BAD_LEADS = [-1, -60, SCHEMA_MAX_LEAD_MINUTES + 1, 10**6, 2**31 - 1]


@pytest.fixture
def user(make_user):
    return make_user("valerie")


def settings_of(user) -> DeliverySettings:
    with tenant_scope(user.pk):
        return DeliverySettings.objects.get(user=user)


def full_clean(user, **fields) -> None:
    with tenant_scope(user.pk):
        obj = DeliverySettings.objects.get(user=user)
        for name, value in fields.items():
            setattr(obj, name, value)
        obj.full_clean()


@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_model_validation_refuses_a_non_e164_number(user, number):
    with pytest.raises(ValidationError) as caught:
        full_clean(user, channel="whatsapp", whatsapp_number=number)
    messages = " ".join(caught.value.message_dict.get("whatsapp_number", []))
    assert "E.164" in messages


@pytest.mark.parametrize("number", UNICODE_DIGIT_NUMBERS)
def test_model_validation_refuses_non_ascii_digits_and_trailing_newlines(user, number):
    with pytest.raises(ValidationError):
        full_clean(user, channel="whatsapp", whatsapp_number=number)


@pytest.mark.parametrize("zone", BAD_ZONES)
def test_model_validation_refuses_an_unknown_time_zone(user, zone):
    with pytest.raises(ValidationError) as caught:
        full_clean(user, timezone=zone)
    assert "IANA time zone" in " ".join(caught.value.message_dict.get("timezone", [])) or (
        zone == "" and "timezone" in caught.value.message_dict
    )


@pytest.mark.parametrize("zone", LENIENT_ZONES)
def test_the_admin_form_refuses_zone_files_that_are_not_iana_names(user, zone):
    form = DeliverySettingsForm(data=_form_data(user, timezone=zone), instance=settings_of(user))
    assert not form.is_valid()
    assert "IANA time zone" in form.errors["timezone"][0]


@pytest.mark.parametrize("lead", BAD_LEADS)
def test_model_validation_refuses_an_absurd_lead(user, lead):
    with pytest.raises(ValidationError) as caught:
        full_clean(user, default_lead_minutes=lead)
    assert "default_lead_minutes" in caught.value.message_dict


def _form_data(user, **overrides) -> dict[str, object]:
    return {
        "user": user.pk,
        "enabled": "on",
        "channel": "whatsapp",
        "whatsapp_number": "+14155550100",
        "telegram_chat_id": "",
        "timezone": "Europe/Berlin",
        "default_lead_minutes": 10,
        **overrides,
    }


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("whatsapp_number", "+1 415 555 0100", "E.164"),
        ("whatsapp_number", "00491701234567", "E.164"),
        ("timezone", "Mars/Olympus_Mons", "IANA time zone"),
        ("timezone", "<script>", "IANA time zone"),
        ("default_lead_minutes", -5, "between 0 and"),
        ("default_lead_minutes", SCHEMA_MAX_LEAD_MINUTES + 1, "between 0 and"),
        ("default_lead_minutes", "1e9", "whole number"),
        ("telegram_chat_id", "12 34", "chat id"),
    ],
)
def test_the_settings_form_refuses_with_a_clear_message_and_stores_nothing(
    user, field, value, words
):
    before = settings_of(user)
    form = DeliverySettingsForm(data=_form_data(user, **{field: value}), instance=before)
    with tenant_scope(user.pk):
        assert not form.is_valid()
    assert words in " ".join(form.errors[field])
    after = settings_of(user)
    assert (after.whatsapp_number, after.timezone, after.default_lead_minutes) == (
        "",
        "UTC",
        10,
    )


@pytest.mark.parametrize("lead", [-1, SCHEMA_MAX_LEAD_MINUTES + 1, 10**6])
def test_the_lead_check_constraint_holds_when_validation_is_skipped(user, lead):
    with pytest.raises(IntegrityError), tenant_scope(user.pk):
        DeliverySettings.objects.filter(user=user).update(default_lead_minutes=lead)
    assert settings_of(user).default_lead_minutes == 10


def test_the_lead_check_constraint_holds_for_raw_sql(user):
    with pytest.raises(IntegrityError), tenant_scope(user.pk), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE delivery_settings SET default_lead_minutes = %s WHERE user_id = %s",
            [100_000, user.pk],
        )
    assert settings_of(user).default_lead_minutes == 10


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--users", "-1"], "cannot be negative"),
        (["--events-per-user", "-3"], "cannot be negative"),
        (["--due-now", "-1"], "cannot be negative"),
        (["--channel", "sms"], "invalid choice"),
        (["--start", "2026-12-02T10:00"], "no UTC offset"),
        (["--start", "tomorrow; DROP TABLE users"], "not an ISO-8601"),
        (["--users", "ten"], "is not a whole number"),
    ],
)
def test_seed_demo_refuses_bad_arguments_and_creates_nothing(db, args, words):
    from django.contrib.auth import get_user_model

    before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=words):
        call_command("seed_demo", *args)
    assert get_user_model().objects.count() == before
