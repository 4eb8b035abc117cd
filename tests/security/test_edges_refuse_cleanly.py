"""Issue 23's smaller items at the edges: a user id too large for a bigint, a deeply
nested JSON body, the anonymous /healthz, and the Telegram update log's retention."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messaging.models import TelegramUpdateSeen
from messaging.telegram import bot as telegram
from portal.tokens import new_api_token
from tenancy.scope import tenant_scope
from tests.fakes.telegram_server import FakeTelegram
from tests.portal.conftest import BOT_USERNAME, WEBHOOK_SECRET

pytestmark = pytest.mark.django_db

TOO_LARGE_ID = "9" * 19  # passes [1-9][0-9]{0,18}, beyond 2**63 - 1
CHAT = 5550009


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False


def test_a_nineteen_digit_user_id_in_an_api_token_is_a_401(db):
    """issue 23 item 8: a 19-digit user id in an API token is refused, not a 500."""
    client = Client(raise_request_exception=False)
    response = client.get(
        "/api/follow-ups", HTTP_AUTHORIZATION=f"Bearer nudge_{TOO_LARGE_ID}_{'a' * 43}"
    )
    assert response.status_code == 401
    assert response.json()["error"].startswith("missing, unknown")


def test_a_nineteen_digit_user_id_in_a_start_code_is_a_bad_code(telegram_settings):
    """issue 23 item 8: a /start code naming a 19-digit user answers "bad code" (no 500,
    and the long poller, which handles the same update, does not stop)."""
    telegram_settings.TELEGRAM_BOT_USERNAME = BOT_USERNAME
    telegram_settings.TELEGRAM_WEBHOOK_SECRET = WEBHOOK_SECRET
    update = FakeTelegram().push_message(CHAT, f"/start {TOO_LARGE_ID}-{'a' * 32}")
    response = Client(raise_request_exception=False).post(
        "/telegram/webhook",
        json.dumps(update),
        content_type="application/json",
        HTTP_X_TELEGRAM_BOT_API_SECRET_TOKEN=WEBHOOK_SECRET,
    )
    assert response.status_code == 200
    assert response.json()["text"] == telegram.BAD_CODE


def test_the_poller_survives_a_nineteen_digit_start_code(telegram_settings, fake_telegram):
    """issue 23 item 8: ``telegram_poll`` answers the forged code and handles the next update."""
    telegram_settings.TELEGRAM_BOT_USERNAME = BOT_USERNAME
    fake_telegram.push_message(CHAT, f"/start {TOO_LARGE_ID}-{'a' * 32}")
    fake_telegram.push_message(CHAT, "/help")
    call_command("telegram_poll", "--once", "--timeout", "0")
    replies = [reply.text for reply in fake_telegram.delivered_to(str(CHAT))]
    assert replies == [telegram.BAD_CODE, telegram.HELP]


def test_a_deeply_nested_json_body_is_a_400(make_user):
    """issue 23 item 8: a body under the size limit that nests past the parser's stack."""
    user = make_user("nester")
    with tenant_scope(user.pk):
        _, token = new_api_token(user.pk, "host")
    body = "[" * 8000 + "]" * 8000  # under the 16 KiB limit
    response = Client(raise_request_exception=False).post(
        "/api/follow-ups",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    assert response.json() == {"error": "the body is nested too deeply"}


def test_anonymous_healthz_does_not_run_the_report_for_every_request(db, settings):
    """issue 23 item 8: the anonymous verdict is reused briefly; the report is ~40 statements."""
    client = Client()
    with CaptureQueriesContext(connection) as first:
        verdict = client.get("/healthz")
    assert len(first) > 10  # the whole report ran once
    with CaptureQueriesContext(connection) as again:
        for _ in range(20):
            assert client.get("/healthz").json() == verdict.json()
    assert len(again) == 0


def test_the_cron_caller_still_gets_a_fresh_report(db, settings):
    """issue 23 item 8: the cache is for anonymous callers only; details are never stale."""
    settings.CRON_SECRET = "a-cron-secret-for-health"
    client = Client()
    client.get("/healthz")
    with CaptureQueriesContext(connection) as detailed:
        body = client.get("/healthz", HTTP_AUTHORIZATION="Bearer a-cron-secret-for-health").json()
    assert "checks" in body and len(detailed) > 10


def test_prune_inbound_forgets_old_telegram_update_ids_but_the_newest(db):
    """issue 23 item 8: ``portal_telegram_updates_seen`` is pruned (``prune_inbound``, on
    the retention cron line), keeping the newest id (the poller resumes after it)."""
    long_ago = timezone.now() - timedelta(days=30)
    for update_id in (100, 101, 102):
        TelegramUpdateSeen.objects.create(update_id=update_id)
    TelegramUpdateSeen.objects.filter(update_id__in=[100, 101, 102]).update(received_at=long_ago)
    TelegramUpdateSeen.objects.create(update_id=50)  # recent (ids need not be in order)
    call_command("prune_inbound", "--older-than", "7")
    assert sorted(TelegramUpdateSeen.objects.values_list("update_id", flat=True)) == [50, 102]
    assert telegram.resume_offset() == 103
