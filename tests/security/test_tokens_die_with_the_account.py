"""API tokens die with the account: deactivation, a password change or reset, expiry,
and support's revocation in the admin each end a token; deliver and materialize
send and plan nothing for a deactivated account."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.test import Client
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from core.config import NudgeConfig
from portal.models import ApiToken
from portal.tokens import new_api_token
from sweeps.deliver import run_deliver
from sweeps.replan import materialize_user
from tenancy.scope import tenant_scope
from tests.channels.queue import queue_follow_up, reload, rows_of

pytestmark = pytest.mark.django_db

User = get_user_model()
PASSWORD = "correct horse battery staple 42"
NEW_PASSWORD = "another horse, another staple 43"


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


@pytest.fixture
def owner(make_user):
    user = make_user("tokenowner")
    user.email = "owner@example.com"
    user.set_password(PASSWORD)
    user.save()
    return user


def token_for(user, **fields) -> str:
    with tenant_scope(user.pk):
        _, plaintext = new_api_token(user.pk, "host", **fields)
    return plaintext


def api_status(token: str) -> int:
    return Client().get("/api/follow-ups", HTTP_AUTHORIZATION=f"Bearer {token}").status_code


def tokens_of(user) -> list[ApiToken]:
    with tenant_scope(user.pk):
        return list(ApiToken.objects.filter(user_id=user.pk))


def test_a_deactivated_owner_is_refused_even_when_the_token_was_not_revoked(owner):
    """issue 23 item 1: the API refuses an inactive user (a bulk update skips signals)."""
    token = token_for(owner)
    assert api_status(token) == 200
    User.objects.filter(pk=owner.pk).update(is_active=False)
    assert api_status(token) == 401
    post = Client().post(
        "/api/follow-ups",
        {"title": "x", "due_at": (timezone.now() + timedelta(hours=1)).isoformat()},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert post.status_code == 401


def test_deactivating_the_account_revokes_its_tokens(owner, django_capture_on_commit_callbacks):
    """issue 23 item 1: a deactivation (a save, e.g. in the admin) revokes every token."""
    token = token_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        owner.is_active = False
        owner.save()
    [stored] = tokens_of(owner)
    assert stored.revoked_at is not None and stored.revoked_how == "account deactivated"
    User.objects.filter(pk=owner.pk).update(is_active=True)  # re-activated: still revoked
    assert api_status(token) == 401


def test_changing_the_password_revokes_the_tokens(owner, django_capture_on_commit_callbacks):
    """issue 23 item 1: the password change page ends the API tokens as well as sessions."""
    token = token_for(owner)
    client = Client()
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/account/",  # the user area's account page (issue 24)
            {
                "change": "password",
                "old_password": PASSWORD,
                "new_password1": NEW_PASSWORD,
                "new_password2": NEW_PASSWORD,
            },
        )
    assert response.status_code == 302, response.content
    assert api_status(token) == 401
    assert tokens_of(owner)[0].revoked_how == "password changed"


def test_a_password_reset_revokes_the_tokens(owner, django_capture_on_commit_callbacks):
    """issue 23 item 1: setting a new password from the reset mail ends the API tokens."""
    token = token_for(owner)
    client = Client()
    uid = urlsafe_base64_encode(force_bytes(owner.pk))
    link = f"/accounts/reset/{uid}/{default_token_generator.make_token(owner)}/"
    form_page = client.get(link, follow=True)
    assert form_page.status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(
            form_page.redirect_chain[-1][0],
            {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        )
    assert done.status_code == 302, done.content
    assert api_status(token) == 401


def test_signing_in_does_not_revoke_the_tokens(owner, django_capture_on_commit_callbacks):
    """issue 23 item 1: only a new password counts (signing in saves the user too)."""
    token = token_for(owner)
    with django_capture_on_commit_callbacks(execute=True):
        assert Client().login(username=owner.username, password=PASSWORD)
    assert api_status(token) == 200


def test_an_expired_token_is_refused_and_the_settings_page_says_when(owner):
    """issue 23 item 1: tokens may carry an expiry (default none), shown in Settings."""
    now = timezone.now()
    expired = token_for(owner, expires_at=now - timedelta(minutes=1))
    lasting = token_for(owner, expires_at=now + timedelta(days=30))
    forever = token_for(owner)
    assert api_status(expired) == 401
    assert api_status(lasting) == 200
    assert api_status(forever) == 200
    client = Client()
    client.force_login(owner)
    page = client.get("/settings/").content.decode()
    assert "no expiry" in page
    assert f"expires {(now + timedelta(days=30)):%-d %b %Y}" in page
    assert "expired " in page


def test_a_token_made_on_the_settings_page_can_expire(owner):
    """issue 23 item 1: the user chooses the expiry when making a token."""
    client = Client()
    client.force_login(owner)
    response = client.post("/settings/tokens", {"name": "ci", "expires_in": "30"})
    assert response.status_code == 302  # post, redirect, get: shown once (issue 24)
    [stored] = tokens_of(owner)
    assert timedelta(days=29) < stored.expires_at - timezone.now() <= timedelta(days=30)


def test_deliver_sends_nothing_to_a_deactivated_account(make_user, recording_channel):
    """issue 23 item 1: what is already queued for a deactivated account is skipped."""
    now = timezone.now().replace(microsecond=0)
    user = make_user("leaver")
    row = queue_follow_up(user, "Private title", now=now)
    User.objects.filter(pk=user.pk).update(is_active=False)
    run_deliver(now)
    assert recording_channel.sent == []
    settled = reload(row)
    assert settled.outcome == "skipped" and settled.last_error == "account deactivated"


def test_materialize_plans_nothing_for_a_deactivated_account(make_user):
    """issue 23 item 1: materializing a deactivated user (e.g. after an API write) queues
    nothing and withdraws what was pending."""
    from followups import actions as followups

    now = timezone.now()
    user = make_user("gone")
    followups.create_follow_up(
        user.pk, "Still here?", now + timedelta(minutes=30), now, NudgeConfig.from_settings()
    )
    assert len(rows_of(user)) == 1
    User.objects.filter(pk=user.pk).update(is_active=False)
    result = materialize_user(user.pk, now, NudgeConfig.from_settings())
    assert result.queued == 0 and rows_of(user) == []


@pytest.fixture
def support_client(db):
    staff = User.objects.create_user("helpdesk", "helpdesk@example.com", PASSWORD, is_staff=True)
    staff.is_superuser = True
    staff.save()
    client = Client()
    client.force_login(staff)
    return client


def test_support_sees_and_revokes_tokens_in_the_admin_and_it_is_audited(
    owner, support_client, caplog
):
    """issue 23 item 1: support sees a user's tokens (never the digest) and revokes them."""
    token = token_for(owner, expires_at=timezone.now() + timedelta(days=3))
    [stored] = tokens_of(owner)
    with caplog.at_level(logging.INFO, logger="nudge.admin.audit"):
        listing = support_client.get("/admin/portal/apitoken/")
    assert listing.status_code == 200
    page = listing.content.decode()
    assert owner.username in page and stored.hint in page
    assert stored.secret_digest not in page
    assert any(r.message == "staff viewed tenant rows" for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nudge.admin.audit"):
        revoked = support_client.post(
            "/admin/portal/apitoken/",
            {"action": "revoke", "_selected_action": [str(stored.pk)]},
            follow=True,
        )
    assert revoked.status_code == 200
    assert "1 token(s) revoked" in revoked.content.decode()
    assert api_status(token) == 401
    assert tokens_of(owner)[0].revoked_how == "revoked by support (helpdesk)"
    [entry] = [r for r in caplog.records if r.message == "staff revoked API tokens"]
    assert entry.rows == [str(stored.pk)] and entry.staff_username == "helpdesk"


def test_staff_without_the_change_permission_cannot_revoke(owner):
    """issue 23 item 1: revoking takes the change permission on API tokens."""
    from django.contrib.auth.models import Permission

    token = token_for(owner)
    [stored] = tokens_of(owner)
    viewer = User.objects.create_user("looker", "l@example.com", PASSWORD, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    client = Client()
    client.force_login(viewer)
    assert client.get("/admin/portal/apitoken/").status_code == 200
    client.post(
        "/admin/portal/apitoken/", {"action": "revoke", "_selected_action": [str(stored.pk)]}
    )
    assert api_status(token) == 200


def test_support_deactivating_a_user_in_the_admin_revokes_their_tokens(
    owner, support_client, django_capture_on_commit_callbacks
):
    """issue 23 item 1: the admin's save runs in the support scope; the revocation follows
    its commit (scopes do not nest) and still happens."""
    token = token_for(owner)
    joined = timezone.localtime(owner.date_joined)
    with django_capture_on_commit_callbacks(execute=True):
        response = support_client.post(
            f"/admin/auth/user/{owner.pk}/change/",
            {
                "username": owner.username,
                "email": owner.email,
                "date_joined_0": f"{joined:%Y-%m-%d}",
                "date_joined_1": f"{joined:%H:%M:%S}",
                # is_active left unticked: the account is deactivated
            },
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert not User.objects.get(pk=owner.pk).is_active
    assert tokens_of(owner)[0].revoked_how == "account deactivated"
    User.objects.filter(pk=owner.pk).update(is_active=True)
    assert api_status(token) == 401
