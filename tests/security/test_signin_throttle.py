"""Sign-in resists guessing (django-axes, per account and per client, on both login
pages, with a clear message and support's unlock); password reset is limited per
address and per client, mails outside the request, and tells nothing by its work."""

from __future__ import annotations

import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.models import PasswordResetRequest

User = get_user_model()
PASSWORD = "correct horse battery staple 42"
LIMIT = 3


@pytest.fixture(autouse=True)
def _throttle(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.NUDGE_SIGNIN_FAILURE_LIMIT = LIMIT  # each wrong guess costs a password hash


def client_from(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def sign_in(client: Client, username: str, password: str, page: str = "/accounts/login/"):
    return client.post(page, {"username": username, "password": password})


def signed_in(response) -> bool:
    return response.status_code == 302


@pytest.mark.django_db
def test_an_account_is_locked_after_the_limit_whatever_the_client(db):
    """issue 23 item 2: per-account throttling on /accounts/login/ — guesses from many
    addresses lock the account, and then even the right password is refused, clearly."""
    User.objects.create_user("ana", "ana@example.com", PASSWORD)
    for attempt in range(LIMIT - 1):
        assert sign_in(client_from(f"198.51.100.{attempt}"), "ana", "wrong").status_code == 200
    # The LIMIT-th failure is answered with the lock already.
    assert sign_in(client_from("198.51.100.200"), "ana", "wrong").status_code == 429
    locked = sign_in(client_from("203.0.113.9"), "ana", PASSWORD)
    assert locked.status_code == 429
    assert "Sign-in paused" in locked.content.decode()
    assert "15 minutes" in locked.content.decode()
    assert int(locked["Retry-After"]) == 15 * 60
    # Another account, from the same new address, is not affected.
    User.objects.create_user("bo", "bo@example.com", PASSWORD)
    assert signed_in(sign_in(client_from("203.0.113.9"), "bo", PASSWORD))


@pytest.mark.django_db
def test_a_client_is_locked_after_the_limit_whatever_the_account(db):
    """issue 23 item 2: per-client throttling — one address guessing many accounts."""
    User.objects.create_user("cy", "cy@example.com", PASSWORD)
    guesser = client_from("198.51.100.77")
    for attempt in range(LIMIT):
        sign_in(guesser, f"someone{attempt}", "wrong")
    assert sign_in(guesser, "cy", PASSWORD).status_code == 429
    assert signed_in(sign_in(client_from("198.51.100.78"), "cy", PASSWORD))


@pytest.mark.django_db
def test_the_admin_login_is_throttled_too(db):
    """issue 23 item 2: /admin/login/ counts and refuses like the portal's page."""
    User.objects.create_user("staffer", "s@example.com", PASSWORD, is_staff=True)
    for attempt in range(LIMIT):
        sign_in(client_from(f"198.51.100.{attempt}"), "staffer", "wrong", "/admin/login/")
    locked = sign_in(client_from("203.0.113.10"), "staffer", PASSWORD, "/admin/login/")
    assert locked.status_code == 429
    assert "Sign-in paused" in locked.content.decode()


@pytest.mark.django_db
def test_below_the_limit_the_right_password_signs_in(db):
    """issue 23 item 2: the throttle does not get in an honest user's way."""
    User.objects.create_user("di", "di@example.com", PASSWORD)
    client = client_from("198.51.100.5")
    for _ in range(LIMIT - 1):
        sign_in(client, "di", "wrong")
    assert signed_in(sign_in(client, "di", PASSWORD))


@pytest.mark.django_db
def test_support_unlocks_with_the_command(db):
    """issue 23 item 2: ``manage.py axes_reset_username`` lifts an account's lock."""
    User.objects.create_user("ed", "ed@example.com", PASSWORD)
    for attempt in range(LIMIT):
        sign_in(client_from(f"198.51.100.{attempt}"), "ed", "wrong")
    assert sign_in(client_from("203.0.113.1"), "ed", PASSWORD).status_code == 429
    call_command("axes_reset_username", "ed")
    assert signed_in(sign_in(client_from("203.0.113.1"), "ed", PASSWORD))


@pytest.mark.django_db
def test_support_sees_and_deletes_the_lock_in_the_admin(db):
    """issue 23 item 2: the admin lists the access attempts; deleting them unlocks."""
    User.objects.create_user("fi", "fi@example.com", PASSWORD)
    for attempt in range(LIMIT):
        sign_in(client_from(f"198.51.100.{attempt}"), "fi", "wrong")
    support = User.objects.create_user(
        "helper", "h@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    staff = Client()
    staff.force_login(support)
    listing = staff.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "fi" in listing.content.decode()
    from axes.models import AccessAttempt

    ids = [str(pk) for pk in AccessAttempt.objects.values_list("pk", flat=True)]
    confirmed = staff.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )
    assert confirmed.status_code == 302
    assert signed_in(sign_in(client_from("203.0.113.2"), "fi", PASSWORD))


def wait_for_mailers() -> None:
    for thread in threading.enumerate():
        if thread.name == "password-reset-mail":
            thread.join(10)


def shape(sql: str) -> str:
    """A statement without its values."""
    return sql.split(" WHERE ")[0].split(" VALUES ")[0]


def ask_reset(client: Client, address: str):
    response = client.post("/accounts/password_reset/", {"email": address})
    assert response.status_code == 302 and response["Location"] == "/accounts/password_reset/done/"
    return response


@pytest.mark.django_db(transaction=True)
def test_reset_does_the_same_work_for_a_registered_and_an_unknown_address(mailoutbox):
    """issue 23 item 2: the request's statements are the same either way (no oracle);
    the mail is looked up and sent by a thread after the request's commit."""
    User.objects.create_user("gi", "gi@example.com", PASSWORD)
    statements = {}
    for address in ("gi@example.com", "nobody@example.com"):
        with CaptureQueriesContext(connection) as queries:
            ask_reset(client_from("198.51.100.20"), address)
        statements[address] = [shape(q["sql"]) for q in queries]
        # Nothing in the request looks the address up among the users.
        assert not any("auth_user" in q["sql"] for q in queries), queries.captured_queries
    assert statements["gi@example.com"] == statements["nobody@example.com"]
    wait_for_mailers()
    assert [m.to for m in mailoutbox] == [["gi@example.com"]]
    assert "/accounts/reset/" in mailoutbox[0].body


@pytest.mark.django_db(transaction=True)
def test_reset_mail_is_limited_per_address(mailoutbox, settings):
    """issue 23 item 2: one address gets at most N reset mails an hour, from any client."""
    settings.NUDGE_PASSWORD_RESET_PER_ADDRESS_HOUR = 2
    User.objects.create_user("ho", "ho@example.com", PASSWORD)
    for attempt in range(5):
        ask_reset(client_from(f"198.51.100.{attempt}"), "HO@example.com ")
    wait_for_mailers()
    deadline = time.monotonic() + 5
    while len(mailoutbox) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(mailoutbox) == 2


@pytest.mark.django_db(transaction=True)
def test_reset_requests_are_limited_per_client(mailoutbox, settings):
    """issue 23 item 2: one client may ask for at most N resets an hour, for any addresses."""
    settings.NUDGE_PASSWORD_RESET_PER_CLIENT_HOUR = 3
    User.objects.create_user("iv", "iv@example.com", PASSWORD)
    sprayer = client_from("198.51.100.99")
    for attempt in range(6):
        ask_reset(sprayer, f"victim{attempt}@example.com")
    ask_reset(sprayer, "iv@example.com")  # over the limit: silently not sent
    ask_reset(client_from("198.51.100.100"), "iv@example.com")  # another client: sent
    wait_for_mailers()
    assert PasswordResetRequest.objects.count() == 4
    assert [m.to for m in mailoutbox] == [["iv@example.com"]]
