"""Rows settled before failure kinds existed get theirs from the words they were settled with."""

from __future__ import annotations

import importlib

import psycopg
import pytest

from scheduled_sends import failures
from scheduled_sends.models import ScheduledSend
from tenancy.rls import across_tenants
from tenancy.scope import rls_bypass, tenant_scope
from tests.conftest import owner_conninfo, utc

NOW = utc(2026, 12, 2, 15, 0)
MIGRATION = importlib.import_module("scheduled_sends.migrations.0015_failure_kind")

# last_error as deliver and the channels wrote it -> the kind the backfill tells from it.
WRITTEN = {
    failures.INTERRUPTED_REASON: "interrupted",
    f"{failures.UNUSABLE_RECEIPT} (NoneType)": "unusable_receipt",
    "[protocol] Twilio accepted the message but its answer was unreadable (sid None); "
    "not resent, to avoid a duplicate": "unusable_receipt",
    "[timeout] Telegram did not answer in time — it may have been delivered; not resent": (
        "unconfirmed"
    ),
    "no address configured for the telegram channel": "no_address",
    "[config] WhatsApp is not configured: TWILIO_AUTH_TOKEN empty": "configuration",
    "[401] Telegram rejected the bot token: check TELEGRAM_BOT_TOKEN": "configuration",
    "[403] Telegram refused: Forbidden: bot was blocked by the user": "refused",
    "[21211] Twilio: invalid number (The 'To' number is not valid)": "refused",
    "something nobody can place": "",
}


@pytest.mark.django_db(transaction=True)
def test_the_backfill_tells_each_kind_from_its_words_for_every_tenant(make_user):
    alice, bob = make_user("alice"), make_user("bob")
    for i, text in enumerate(WRITTEN):
        user = (alice, bob)[i % 2]
        with tenant_scope(user.pk):
            ScheduledSend.objects.create(
                user=user,
                kind="follow_up",
                ref_id=i,
                fire_at=NOW,
                intended_at=NOW,
                subject_starts_at=NOW,
                outcome="failed",
                last_error=text,
            )
    with tenant_scope(alice.pk):
        ScheduledSend.objects.create(
            user=alice,
            kind="follow_up",
            ref_id=999,
            fire_at=NOW,
            intended_at=NOW,
            subject_starts_at=NOW,
            outcome="sent",
            sent_at=NOW,
            delivery_status="undelivered",
        )
    with psycopg.connect(owner_conninfo()) as owner:
        for statement in across_tenants("scheduled_sends", MIGRATION.BACKFILL).sql:
            owner.execute(statement)
    with rls_bypass():
        told = dict(ScheduledSend.objects.values_list("last_error", "failure_kind"))
    assert told == {**WRITTEN, "": "undelivered"}
