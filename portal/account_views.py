"""The Account page: the password, and an e-mail change confirmed from the new address."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.actions import language_of
from core.config import NudgeConfig
from portal import email_change
from portal.forms import AccountEmailForm
from portal.language import user_page
from portal.signin import client_address, reset_allowed
from portal.views import redirect_saying
from tenancy.scope import tenant_scope


@user_page("GET", "POST")
def account_page(request: HttpRequest) -> HttpResponse:
    """The signed-in person's own account: their e-mail address and password, in the
    user area (the admin's password pages are for staff)."""
    user = request.user
    email_form = AccountEmailForm(user, initial={"email": user.email})
    password_form = PasswordChangeForm(user)
    if request.method == "POST" and request.POST.get("change") == "email":
        email_form = AccountEmailForm(user, request.POST)
        if email_form.is_valid() and _ask_to_change_email(request, email_form):
            return redirect("portal:account")
    elif request.method == "POST" and request.POST.get("change") == "password":
        password_form = PasswordChangeForm(user, request.POST)
        if password_form.is_valid():
            password_form.save()  # revokes the API tokens (portal/signals.py)
            update_session_auth_hash(request, password_form.user)  # stay signed in here
            said = _("Password changed. Your API tokens were revoked; make new ones.")
            return redirect_saying(request, "portal:account", said)
    # Django's form focuses the old password; here the page opens on the e-mail.
    password_form.fields["old_password"].widget.attrs.pop("autofocus", None)
    return render(
        request,
        "portal/account.html",
        {"email_form": email_form, "password_form": password_form},
    )


def _ask_to_change_email(request: HttpRequest, form: AccountEmailForm) -> bool:
    """Mail the link to the new address and the notice to the old (``email_change``); False
    when the hourly limits refuse it (said on the form). Says nothing about who holds it."""
    user, new_address = request.user, form.cleaned_data["email"]
    config = NudgeConfig.from_settings()
    if not reset_allowed(new_address, client_address(request), timezone.now(), config):
        form.add_error(
            "email", _("Too many e-mails were asked for in the last hour. Try again later.")
        )
        return False
    token = email_change.link_token(user, new_address)
    link = request.build_absolute_uri(reverse("portal:email_confirm", args=[token]))
    email_change.request_change(user, new_address, link)
    messages.success(
        request,
        _(
            "Check the inbox of %(address)s and follow the link there within %(hours)s "
            "hours. Until then your address stays %(current)s."
        )
        % {
            "address": new_address,
            "hours": int(email_change.LINK_VALID_FOR.total_seconds() // 3600),
            "current": user.email or "—",
        },
    )
    return True


@never_cache
@require_http_methods(["GET", "POST"])
def email_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link mailed to a new address: shows it, changes it on Confirm. No sign-in needed
    (it may be opened on another device): the signed token names the account."""
    link = email_change.read_link(token)
    owner = link.user.pk if link is not None else request.user.pk  # None when signed out
    language = settings.LANGUAGE_CODE
    if owner is not None:
        with tenant_scope(owner):
            language = language_of(owner)
    with translation.override(language):
        if link is None:
            state, address, status = "unusable", "", 400
        elif request.method == "GET":
            state, address, status = "ask", link.new_address, 200
        else:
            email_change.make_change(link)
            state, address, status = "done", link.new_address, 200
        response = render(
            request,
            "portal/email_confirm.html",
            {"state": state, "address": address},
            status=status,
        )
    response.headers.setdefault("Content-Language", language)
    return response
