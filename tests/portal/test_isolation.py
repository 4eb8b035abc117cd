"""User A cannot reach user B's follow-ups, connections, tokens or history through
any page or the API: ids guessed, tokens swapped. Runs as the non-superuser
application role, like tests/test_isolation.py, so RLS is what is tested."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import DeliverySettings
from calendars.models import CalendarConnection
from core.bearer import digest
from core.config import NudgeConfig
from followups import actions as followups
from followups.models import FollowUp
from messaging.addresses import new_telegram_code
from portal.models import ApiToken
from portal.tokens import new_api_token, parse_api_token
from sweeps.deliver import run_deliver
from tenancy.scope import tenant_scope
from tests.fakes.telegram_server import FakeTelegram

from .test_telegram import post_update


@pytest.fixture
def two(signed_in, recording_channel):
    """Alice and Bob, each with a follow-up, a nudge in history, a calendar and a token."""
    now = timezone.now()
    users = {}
    config = NudgeConfig.from_settings()
    for name in ("alice", "bob"):
        user, client = signed_in(name)
        client.get(reverse("portal:home"))  # first visit: settings
        follow_up = followups.create_follow_up(
            user.pk, f"{name}'s secret plan", now + timedelta(minutes=11), now, config
        )
        with tenant_scope(user.pk):
            connection = CalendarConnection.objects.create(
                user=user, provider="ics", account=f"{name}-calendar"
            )
            token, plaintext = new_api_token(user.pk, f"{name}-token")
        users[name] = {
            "user": user,
            "client": client,
            "follow_up": follow_up,
            "connection": connection,
            "token": token,
            "plaintext": plaintext,
        }
    run_deliver(now + timedelta(minutes=1, seconds=5))  # one sent nudge each, in history
    return users["alice"], users["bob"]


def follow_up_of(owner) -> FollowUp:
    with tenant_scope(owner["user"].pk):
        return FollowUp.objects.get(pk=owner["follow_up"].pk)


def test_pages_show_only_the_signed_in_users_rows(two):
    alice, _bob = two
    for name in ("portal:home", "portal:follow_ups", "portal:settings", "portal:calendars"):
        page = alice["client"].get(reverse(name)).content.decode()
        assert "bob" not in page, name
    home = alice["client"].get(reverse("portal:home")).content.decode()
    assert "alice&#x27;s secret plan" in home and "sent" in home


def test_guessed_ids_on_every_page_action_are_404_and_change_nothing(two):
    alice, bob = two
    client = alice["client"]
    fid, cid, tid = bob["follow_up"].pk, bob["connection"].pk, bob["token"].pk
    attempts = [
        ("get", reverse("portal:follow_up_edit", args=[fid]), {}),
        (
            "post",
            reverse("portal:follow_up_edit", args=[fid]),
            {"title": "pwned", "due_at": "2030-01-01T10:00"},
        ),
        ("post", reverse("portal:follow_up_done", args=[fid]), {"done": "1"}),
        ("post", reverse("portal:follow_up_delete", args=[fid]), {}),
        ("post", reverse("portal:calendar_disconnect", args=[cid]), {}),
        ("post", reverse("portal:api_token_revoke", args=[tid]), {}),
        ("post", reverse("portal:follow_up_delete", args=[2**63]), {}),
        ("get", reverse("portal:follow_up_edit", args=[10**30]), {}),
    ]
    for method, url, data in attempts:
        assert getattr(client, method)(url, data).status_code == 404, url
    after = follow_up_of(bob)
    assert (after.title, after.done) == ("bob's secret plan", False)
    with tenant_scope(bob["user"].pk):
        assert CalendarConnection.objects.filter(pk=cid).exists()
        assert ApiToken.objects.get(pk=tid).revoked_at is None


def test_the_api_with_guessed_ids_answers_404_and_changes_nothing(two, client):
    alice, bob = two
    auth = {"HTTP_AUTHORIZATION": f"Bearer {alice['plaintext']}"}
    url = reverse("api-follow-up", args=[bob["follow_up"].pk])
    assert client.get(url, **auth).status_code == 404
    assert (
        client.patch(url, '{"title": "pwned"}', content_type="application/json", **auth).status_code
        == 404
    )
    assert client.delete(url, **auth).status_code == 404
    listed = client.get(reverse("api-follow-ups"), **auth).json()["follow_ups"]
    assert [f["title"] for f in listed] == ["alice's secret plan"]
    assert follow_up_of(bob).title == "bob's secret plan"


def test_swapped_tokens_are_refused(two, client):
    """Alice's secret under Bob's id, Bob's secret under Alice's id: neither works."""
    alice, bob = two
    a, b = parse_api_token(alice["plaintext"]), parse_api_token(bob["plaintext"])
    for forged in (f"nudge_{b.user_id}_{a.secret}", f"nudge_{a.user_id}_{b.secret}"):
        response = client.get(reverse("api-follow-ups"), HTTP_AUTHORIZATION=f"Bearer {forged}")
        assert response.status_code == 401
    # A digest is not a token either.
    forged = f"nudge_{b.user_id}_{digest(b.secret)}"
    assert (
        client.get(reverse("api-follow-ups"), HTTP_AUTHORIZATION=f"Bearer {forged}").status_code
        == 401
    )


def test_a_telegram_link_code_under_another_users_id_links_nobody(two, settings):
    alice, bob = two
    settings.TELEGRAM_WEBHOOK_SECRET = "s3cret_Webhook-token_0123456789"
    with tenant_scope(alice["user"].pk):
        code = new_telegram_code(alice["user"].pk, timezone.now(), NudgeConfig.from_settings())
    forged = f"{bob['user'].pk}-{code.split('-', 1)[1]}"
    post_update(Client(), FakeTelegram().push_message(4242, f"/start {forged}"))
    for owner in (alice, bob):
        with tenant_scope(owner["user"].pk):
            assert DeliverySettings.objects.get(user_id=owner["user"].pk).telegram_chat_id == ""


def test_a_session_cannot_change_another_users_settings(two):
    alice, bob = two
    alice["client"].post(
        reverse("portal:settings"),
        {
            "channel": "console",
            "timezone": "Asia/Tokyo",
            "default_lead_minutes": 60,
            "paused": "on",
        },
    )
    with tenant_scope(bob["user"].pk):
        bob_settings = DeliverySettings.objects.get(user_id=bob["user"].pk)
    assert (bob_settings.timezone, bob_settings.paused) == ("UTC", False)
