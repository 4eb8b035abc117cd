"""issue 34 finding 2 (e-mail change takes the account): the Account page changed the
address with no password and no confirmation, and accepted an address another account
held; the address is where password-reset links go. Now the change asks for the current
password, takes effect only when a signed, expiring link mailed to the new address is
followed, tells the old address, and refuses a taken address without saying so."""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import DeliverySettings
from portal import email_change
from tenancy.scope import tenant_scope

User = get_user_model()
PASSWORD = "correct horse battery staple 42"
ACCOUNT = "/account/"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _plain(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


def signed_in(name: str, address: str | None = None) -> tuple[User, Client]:
    user = User.objects.create_user(name, address or f"{name}@example.com", PASSWORD)
    client = Client()
    client.force_login(user)
    return user, client


def wait_for_mailers() -> None:
    for thread in threading.enumerate():
        if thread.name == email_change.MAILER_THREAD:
            thread.join(10)


def ask(client: Client, address: str, password: str = PASSWORD):
    return client.post(
        ACCOUNT, {"change": "email", "email": address, "password": password}, follow=True
    )


def mails_to(outbox, address: str) -> list:
    return [mail for mail in outbox if mail.to == [address]]


def link_in(mail) -> str:
    return re.search(r"https?://[^/\s]+(/account/email/\S+/)", mail.body).group(1)


def address_of(user) -> str:
    user.refresh_from_db()
    return user.email


@pytest.mark.parametrize("password", ["", "not the password"])
def test_a_change_asks_for_the_current_password(mailoutbox, password):
    """issue 34 finding 2: without the current password nothing is asked for, and
    nothing is mailed."""
    user, client = signed_in("ana")
    page = ask(client, "mallory@example.net", password).content.decode()
    assert "That is not your current password." in page or "This field is required." in page
    assert "Check the inbox" not in page
    wait_for_mailers()
    assert mailoutbox == []
    assert address_of(user) == "ana@example.com"


def test_the_change_takes_effect_only_when_the_link_mailed_to_the_new_address_is_followed(
    mailoutbox,
):
    """issue 34 finding 2: the page says to check the new inbox; the address stays until
    the mailed link is opened *and* confirmed there (a mail scanner's GET changes
    nothing); then it is the account's, and the link is spent."""
    user, client = signed_in("ana")
    page = ask(client, "ana@example.org").content.decode()
    assert "Check the inbox of ana@example.org" in page
    assert "Until then your address stays ana@example.com." in page
    wait_for_mailers()
    [mail] = mails_to(mailoutbox, "ana@example.org")
    assert mail.subject == "Confirm your new e-mail address for nudge"
    assert address_of(user) == "ana@example.com"

    link = link_in(mail)
    elsewhere = Client()  # the link works on another device, signed out
    shown = elsewhere.get(link)
    assert shown.status_code == 200
    assert "Make ana@example.org the e-mail address" in shown.content.decode()
    assert address_of(user) == "ana@example.com"

    done = elsewhere.post(link)
    assert done.status_code == 200
    assert "Your e-mail address is now ana@example.org." in done.content.decode()
    assert address_of(user) == "ana@example.org"
    assert elsewhere.post(link).status_code == 400  # spent: the account changed
    assert address_of(user) == "ana@example.org"


def test_the_old_address_is_told_when_a_change_is_asked_for_and_when_it_is_made(mailoutbox):
    """issue 34 finding 2: the old address hears of the request (with what to do if it
    was not them) and of the change."""
    _, client = signed_in("ana")
    ask(client, "ana@example.org")
    wait_for_mailers()
    [asked] = mails_to(mailoutbox, "ana@example.com")
    assert "ana@example.org" in asked.body and "change your password now" in asked.body
    link = link_in(mails_to(mailoutbox, "ana@example.org")[0])
    Client().post(link)
    told = mails_to(mailoutbox, "ana@example.com")
    assert len(told) == 2
    assert told[1].subject == "Your nudge e-mail address was changed"
    assert "from ana@example.com to ana@example.org" in told[1].body


def test_an_address_another_account_holds_is_refused_without_saying_so(mailoutbox):
    """issue 34 finding 2: the answer to a taken address is the answer to a free one
    (same page, same statements, no lookup in the request); the holder gets no link,
    and which account holds it is never said."""
    signed_in("bo", "bo@example.com")
    user, client = signed_in("ana")
    client.get(ACCOUNT)  # the first visit makes the settings row: not part of the comparison
    pages, statements = {}, {}
    for address in ("BO@example.com", "free@example.com"):
        with CaptureQueriesContext(connection) as queries:
            response = ask(client, address)
        main = response.content.decode().split("<main>")[1].split("</main>")[0]
        # The page but its per-response CSRF token, with the typed address blanked.
        pages[address] = (
            response.status_code,
            response.redirect_chain,
            re.sub(r'value="[^"]{32,}"', "", main).replace(address, "ADDRESS"),
        )
        # Each statement without its values.
        statements[address] = [q["sql"].split(" WHERE ")[0].split(" VALUES ")[0] for q in queries]
        # Nothing in the request looks the address up among the users.
        wheres = [q["sql"].split(" WHERE ", 1)[1] for q in queries if " WHERE " in q["sql"]]
        assert not any('"email"' in where for where in wheres)
    assert pages["BO@example.com"] == pages["free@example.com"]
    assert "Check the inbox of ADDRESS" in pages["free@example.com"][2]
    assert statements["BO@example.com"] == statements["free@example.com"]
    wait_for_mailers()
    assert mails_to(mailoutbox, "BO@example.com") == []
    assert mails_to(mailoutbox, "bo@example.com") == []
    assert len(mails_to(mailoutbox, "free@example.com")) == 1
    assert len(mails_to(mailoutbox, "ana@example.com")) == 2  # told of both requests
    assert address_of(user) == "ana@example.com"


def test_a_link_to_an_address_taken_since_is_refused_in_the_words_of_any_bad_link(
    mailoutbox,
):
    """issue 34 finding 2: confirming looks again; the refusal names no one."""
    user, client = signed_in("ana")
    ask(client, "shared@example.com")
    wait_for_mailers()
    link = link_in(mails_to(mailoutbox, "shared@example.com")[0])
    User.objects.create_user("cy", "Shared@example.com", PASSWORD)
    for method in (Client().get, Client().post):
        refused = method(link)
        assert refused.status_code == 400
        assert "This link cannot be used" in refused.content.decode()
        assert "cy" not in refused.content.decode().split("<main>")[1]
    assert address_of(user) == "ana@example.com"


def test_the_link_is_signed_bound_to_the_account_and_expires(mailoutbox, monkeypatch):
    """issue 34 finding 2: a forged or altered token, one past its 24 hours, and one made
    before the password changed all get the same refusal."""
    user, _ = signed_in("ana")
    token = email_change.link_token(user, "ana@example.org")
    confirm = reverse("portal:email_confirm", args=[token])
    altered = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert Client().post(reverse("portal:email_confirm", args=[altered])).status_code == 400
    # Another address under the same signature.
    payload, rest = token.split(":", 1)
    other = signing.b64_encode(
        signing.b64_decode(payload.encode()).replace(b"ana@example.org", b"eve@example.org")
    ).decode()
    swapped = reverse("portal:email_confirm", args=[f"{other}:{rest}"])
    assert Client().post(swapped).status_code == 400

    real_time = time.time
    monkeypatch.setattr(
        "django.core.signing.time",
        SimpleNamespace(time=lambda: real_time() - email_change.LINK_VALID_FOR.total_seconds() - 5),
    )
    old = email_change.link_token(user, "ana@example.org")
    monkeypatch.undo()
    assert Client().post(reverse("portal:email_confirm", args=[old])).status_code == 400

    user.set_password("a new and different passphrase 7")
    user.save()
    assert Client().post(confirm).status_code == 400
    assert address_of(user) == "ana@example.com"


def test_the_page_the_mails_and_the_link_are_in_the_persons_language(mailoutbox):
    """issue 34 finding 2: the change speaks the person's language (here German)."""
    user, client = signed_in("greta")
    with tenant_scope(user.pk):
        DeliverySettings.objects.create(user=user, language="de")
    page = client.get(ACCOUNT).content.decode()
    assert "Aktuelles Passwort" in page and "Link senden" in page
    wrong = ask(client, "greta@example.org", "falsch").content.decode()
    assert "Das ist nicht dein aktuelles Passwort." in wrong
    asked = ask(client, "greta@example.org").content.decode()
    assert "Sieh im Posteingang von greta@example.org nach" in asked
    wait_for_mailers()
    [mail] = mails_to(mailoutbox, "greta@example.org")
    assert mail.subject == "Bestätige deine neue E-Mail-Adresse für nudge"
    [notice] = mails_to(mailoutbox, "greta@example.com")
    assert notice.subject == "Eine Änderung deiner nudge-E-Mail-Adresse wurde angefordert"
    shown = Client().get(link_in(mail)).content.decode()
    assert "greta@example.org zur E-Mail-Adresse deines nudge-Kontos machen?" in shown
    assert "Bestätigen" in shown
