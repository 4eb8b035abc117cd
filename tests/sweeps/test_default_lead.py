"""NUDGE_DEFAULT_LEAD_MINUTES is what a new user's delivery settings start with."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model

from accounts.admin import DeliverySettingsForm
from accounts.models import DeliverySettings
from sweeps.materialize import run_materialize
from tenancy.scope import tenant_scope
from tests.conftest import utc
from tests.sweeps.factories import add_follow_up, rows

NOW = utc(2026, 12, 2, 12, 0)


def test_a_new_users_lead_is_the_configured_default(db, settings):
    settings.NUDGE_DEFAULT_LEAD_MINUTES = 25
    user = get_user_model().objects.create_user(username="fresh")
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(user=user, channel="console")  # a channel to plan for
    follow_up = add_follow_up(user, NOW + timedelta(hours=1))

    run_materialize(NOW)

    assert [(r.ref_id, r.intended_at) for r in rows(user)] == [
        (follow_up.pk, NOW + timedelta(minutes=35))
    ]


def test_the_admins_new_settings_form_offers_the_configured_default(settings):
    settings.NUDGE_DEFAULT_LEAD_MINUTES = 0
    assert DeliverySettingsForm()["default_lead_minutes"].initial == 0
