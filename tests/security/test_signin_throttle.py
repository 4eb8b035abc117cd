"""Sign-in resists guessing (django-axes, per account and client address together, on
both login pages, with a clear message, a lock that ends, and ways back: a password
reset, support's unlock); password reset is limited per address and per client, mails
outside the request, and tells nothing by its work."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.models import F
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


def shift_attempts_back(minutes: int) -> None:
    """As if ``minutes`` had passed since every recorded failure."""
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))


@pytest.mark.django_db
def test_an_account_is_locked_after_the_limit_from_one_address(db):
    """issue 23 item 2, as issue 34 finding 1 keys it: LIMIT failures at one account
    from one address pause it from there, and then even the right password is refused,
    clearly, before any password is checked."""
    User.objects.create_user("ana", "ana@example.com", PASSWORD)
    guesser = client_from("198.51.100.1")
    for _ in range(LIMIT - 1):
        assert sign_in(guesser, "ana", "wrong").status_code == 200
    # The LIMIT-th failure is answered with the lock already.
    assert sign_in(guesser, "ana", "wrong").status_code == 429
    locked = sign_in(guesser, "ana", PASSWORD)
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Sign-in paused" in page and "15 minutes" in page
    assert "from your network" in page and "does not make it longer" in page
    assert 14 * 60 < int(locked["Retry-After"]) <= 15 * 60
    # Another account, from the same address, is not affected.
    User.objects.create_user("bo", "bo@example.com", PASSWORD)
    assert signed_in(sign_in(guesser, "bo", PASSWORD))


@pytest.mark.django_db
def test_a_strangers_wrong_tries_do_not_stop_the_owner_signing_in_elsewhere(settings):
    """issue 34 finding 1 (lock anyone out): a stranger's ten wrong passwords from
    address A do not stop the owner signing in from address B."""
    settings.NUDGE_SIGNIN_FAILURE_LIMIT = 10
    User.objects.create_user("victim", "victim@example.com", PASSWORD)
    stranger = client_from("198.51.100.66")
    answers = [sign_in(stranger, "victim", "guess").status_code for _ in range(10)]
    assert answers == [200] * 9 + [429]
    assert sign_in(stranger, "victim", PASSWORD).status_code == 429  # from A: paused
    assert signed_in(sign_in(client_from("203.0.113.7"), "victim", PASSWORD))  # from B


@pytest.mark.django_db
def test_one_address_guessing_many_names_locks_out_no_one_else(db):
    """issue 34 finding 1: guesses at many (made-up) names from one address pause
    only those names from there; a real account signs in from that address."""
    User.objects.create_user("cy", "cy@example.com", PASSWORD)
    guesser = client_from("198.51.100.77")
    for attempt in range(3 * LIMIT):
        sign_in(guesser, f"someone{attempt % 3}", "wrong")
    assert sign_in(guesser, "someone0", "wrong").status_code == 429
    assert signed_in(sign_in(guesser, "cy", PASSWORD))


@pytest.mark.django_db
def test_tries_at_made_up_names_do_not_lock_staff_out_of_the_admin(db):
    """issue 34 finding 1: ten wrong tries at a made-up name from an address paused
    sign-in for every account from there, staff included; now staff are paused only
    by tries at their own name."""
    User.objects.create_user("staffer", "s@example.com", PASSWORD, is_staff=True)
    office = client_from("198.51.100.80")
    for _ in range(LIMIT + 2):
        sign_in(office, "no-such-admin", "wrong", "/admin/login/")
    assert sign_in(office, "no-such-admin", "wrong", "/admin/login/").status_code == 429
    assert signed_in(sign_in(office, "staffer", PASSWORD, "/admin/login/"))
    assert office.get("/admin/").status_code == 200


@pytest.mark.django_db
def test_the_admin_login_is_throttled_too(db):
    """issue 23 item 2: /admin/login/ counts and refuses like the portal's page."""
    User.objects.create_user("staffer", "s@example.com", PASSWORD, is_staff=True)
    guesser = client_from("198.51.100.3")
    for _ in range(LIMIT):
        sign_in(guesser, "staffer", "wrong", "/admin/login/")
    locked = sign_in(guesser, "staffer", PASSWORD, "/admin/login/")
    assert locked.status_code == 429
    assert "Sign-in paused" in locked.content.decode()


@pytest.mark.django_db
def test_the_lock_ends_after_the_cool_off_and_tries_while_locked_do_not_renew_it(db):
    """issue 34 finding 1 (indefinitely): one wrong try every 14 minutes kept a
    15-minute lock going (still locked at 70 minutes). Tries while locked are refused
    and not counted, so the lock ends a cool-off after the failure that reached the
    limit, and the count starts again from nothing."""
    User.objects.create_user("eve", "eve@example.com", PASSWORD)
    guesser = client_from("198.51.100.9")
    for _ in range(LIMIT):
        sign_in(guesser, "eve", "wrong")
    shift_attempts_back(14)
    still = sign_in(guesser, "eve", "wrong")  # refused unchecked, not recorded
    assert still.status_code == 429
    assert int(still["Retry-After"]) <= 60 and "within 1 minute;" in still.content.decode()
    shift_attempts_back(14)  # 28 minutes after the lock began, 14 after the last try
    assert signed_in(sign_in(guesser, "eve", PASSWORD))
    # A fresh count: one more wrong password is one failure, not the limit again.
    assert sign_in(client_from("198.51.100.9"), "eve", "wrong").status_code == 200
    assert AccessAttempt.objects.get(username="eve").failures_since_start == 1


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
    client = client_from("198.51.100.1")
    for _ in range(LIMIT):
        sign_in(client, "ed", "wrong")
    assert sign_in(client, "ed", PASSWORD).status_code == 429
    call_command("axes_reset_username", "ed")
    assert signed_in(sign_in(client, "ed", PASSWORD))


@pytest.mark.django_db
def test_support_sees_and_deletes_the_lock_in_the_admin(db):
    """issue 23 item 2: the admin lists the access attempts; deleting them unlocks."""
    User.objects.create_user("fi", "fi@example.com", PASSWORD)
    client = client_from("198.51.100.2")
    for _ in range(LIMIT):
        sign_in(client, "fi", "wrong")
    assert sign_in(client, "fi", PASSWORD).status_code == 429
    support = User.objects.create_user(
        "helper", "h@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    staff = Client()
    staff.force_login(support)
    listing = staff.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "fi" in listing.content.decode()
    ids = [str(pk) for pk in AccessAttempt.objects.values_list("pk", flat=True)]
    confirmed = staff.post(
        "/admin/axes/accessattempt/",
        {"action": "delete_selected", "_selected_action": ids, "post": "yes"},
    )
    assert confirmed.status_code == 302
    assert signed_in(sign_in(client, "fi", PASSWORD))


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


@pytest.mark.django_db(transaction=True)
def test_a_completed_password_reset_lifts_the_lock(mailoutbox):
    """issue 34 finding 1 (a way back): the page said "reset your password … support
    can lift the pause", but only ``manage.py axes_reset`` did. Setting a new password
    from the mailed link lifts the account's locks."""
    User.objects.create_user("gus", "gus@example.com", PASSWORD)
    home = client_from("198.51.100.31")
    for _ in range(LIMIT):
        sign_in(home, "gus", "wrong")
    assert sign_in(home, "gus", PASSWORD).status_code == 429
    ask_reset(home, "gus@example.com")
    wait_for_mailers()
    [mail] = mailoutbox
    link = re.search(r"https?://[^/\s]+(/accounts/reset/\S+/)", mail.body).group(1)
    form = home.get(link, follow=True)
    assert form.status_code == 200 and "new_password1" in form.content.decode()
    new_password = "a different horse, staple 43"
    done = home.post(
        form.redirect_chain[-1][0],
        {"new_password1": new_password, "new_password2": new_password},
    )
    assert done.status_code == 302 and done["Location"] == "/accounts/reset/done/"
    assert not AccessAttempt.objects.filter(username="gus").exists()
    assert signed_in(sign_in(home, "gus", new_password))
