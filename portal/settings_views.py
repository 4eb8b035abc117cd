"""The Settings page: zone, leads, quiet hours, pause, linking Telegram and WhatsApp, API tokens."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache

from accounts.actions import ensure_settings, update_settings
from accounts.models import AccountNotice, Channel, DeliverySettings
from core.config import NudgeConfig
from core.ids import owned
from messaging.addresses import new_telegram_code
from messaging.models import LinkCode, OptInRecord
from messaging.telegram import bot as telegram
from messaging.whatsapp import inbound as whatsapp
from portal.forms import (
    ApiTokenForm,
    SettingsForm,
    WhatsAppCodeForm,
    WhatsAppNumberForm,
    canonical_zone,
)
from portal.language import date_formats, user_page
from portal.models import ApiToken
from portal.tokens import new_api_token, revoke_api_tokens
from portal.views import ZONE_ALIASES_JSON, confirm_then, mine, redirect_saying
from tenancy.scope import tenant_scope

NOTICE_DAYS = timedelta(days=30)


def _settings_page(request: HttpRequest, **shown) -> HttpResponse:
    """The page, with ``shown`` (a form and its errors, a new token) over the defaults."""
    user_id = request.user.pk
    now = timezone.now()
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        return render(
            request,
            "portal/settings.html",
            {
                "delivery": delivery,
                "form": SettingsForm(delivery=delivery),
                "tokens": list(
                    ApiToken.objects.filter(user_id=user_id, revoked_at=None).order_by("pk")
                ),
                "now": now,
                "token_form": ApiTokenForm(),
                "number_form": WhatsAppNumberForm(),
                "code_form": WhatsAppCodeForm(),
                "code_pending": LinkCode.objects.filter(
                    user_id=user_id,
                    channel=Channel.WHATSAPP,
                    used_at=None,
                    expires_at__gt=now,
                ).exists(),
                "opt_ins": list(
                    OptInRecord.objects.filter(user_id=user_id).order_by("-recorded_at")[:5]
                ),
                "offered": whatsapp.channels_offered(),
                "zone_aliases": ZONE_ALIASES_JSON,
                "confirmed": _confirmed(delivery),
                "notices": list(
                    AccountNotice.objects.filter(
                        user_id=user_id, created_at__gt=now - NOTICE_DAYS
                    ).order_by("-created_at")[:5]
                ),
                **date_formats(delivery),
                **shown,
            },
        )


def _confirmed(delivery: DeliverySettings) -> dict[str, bool]:
    """Per channel: the linked address has the user's own opt-in on record. Only then
    does the page say it is confirmed. Inside the user's scope."""
    return {
        channel: bool(address)
        and OptInRecord.objects.filter(
            user_id=delivery.user_id, channel=channel, address=address
        ).exists()
        for channel, address in (
            (Channel.TELEGRAM, delivery.telegram_chat_id),
            (Channel.WHATSAPP, delivery.whatsapp_number),
        )
    }


@user_page("GET", "POST")
def settings_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _settings_page(request)
    form = SettingsForm(request.POST, delivery=request.delivery)
    if not form.is_valid():
        return _settings_page(request, form=form)
    # One write, re-queued once it has committed.
    update_settings(request.user.pk, form.cleaned_data, timezone.now())
    with translation.override(form.cleaned_data.get("language") or translation.get_language()):
        return redirect_saying(request, "portal:settings", _("Settings saved."))


@user_page("POST")
def use_device_zone(request: HttpRequest) -> HttpResponse:
    """Home's offer to a new user still on the server's UTC: their device's zone
    (detected by the browser), in one press."""
    zone = canonical_zone(request.POST.get("timezone", ""))
    if zone is None:
        unknown = _("That time zone is not known here; choose yours in Settings.")
        return redirect_saying(request, "portal:settings", unknown, messages.ERROR)
    update_settings(request.user.pk, {"timezone": zone}, timezone.now())
    said = _("Times are now shown in %(zone)s.") % {"zone": zone.replace("_", " ")}
    return redirect_saying(request, "portal:home", said)


@user_page("POST")
def link_telegram(request: HttpRequest) -> HttpResponse:
    """A fresh one-time link, shown on a page that waits for it to be used: a button
    that opens the bot (on the phone), its QR code (at a desktop), and a check
    that moves on to Settings once the bot has received "/start <code>"."""
    if not settings.TELEGRAM_BOT_USERNAME:
        unavailable = _("Telegram is not available on this server.")
        return redirect_saying(request, "portal:settings", unavailable, messages.ERROR)
    user_id = request.user.pk
    now = timezone.now()
    config = NudgeConfig.from_settings()
    with tenant_scope(user_id):
        code = new_telegram_code(user_id, now, config)
    link = telegram.link_url(code)
    response = render(
        request,
        "portal/telegram_link.html",
        {
            "link": link,
            "qr": telegram.link_qr(link),
            "expires_minutes": int(config.link_code_lifetime.total_seconds() // 60),
        },
    )
    response["Cache-Control"] = "no-store"  # the link is a one-time secret
    return response


@user_page("GET")
@never_cache
def telegram_link_state(request: HttpRequest) -> JsonResponse:
    """What the waiting page polls: has the bot received the link yet?"""
    with tenant_scope(request.user.pk):
        state = telegram.link_state(request.user.pk, timezone.now())
    if state == telegram.LinkState.LINKED:
        messages.success(request, _("Telegram linked: nudges now go there."))
    return JsonResponse({"state": state})


@user_page("POST")
def whatsapp_number(request: HttpRequest) -> HttpResponse:
    form = WhatsAppNumberForm(request.POST)
    if not form.is_valid():
        return _settings_page(request, number_form=form)
    try:
        whatsapp.send_code(
            request.user.pk,
            form.cleaned_data["number"],
            timezone.now(),
            NudgeConfig.from_settings(),
        )
    except whatsapp.WhatsAppLinkError as exc:
        form.add_error("number", str(exc))
        return _settings_page(request, number_form=form)
    said = _("We sent a six-digit code to that number on WhatsApp.")
    return redirect_saying(request, "portal:settings", said)


@user_page("POST")
def whatsapp_code(request: HttpRequest) -> HttpResponse:
    form = WhatsAppCodeForm(request.POST)
    if form.is_valid() and whatsapp.confirm_code(
        request.user.pk, form.cleaned_data["code"], timezone.now()
    ):
        said = _("WhatsApp confirmed: nudges now go there.")
        return redirect_saying(request, "portal:settings", said)
    if form.is_valid():
        form.add_error("code", _("That code is wrong or has expired. Ask for a new one."))
    return _settings_page(request, code_form=form)


@user_page("POST")
def api_token_create(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        return _settings_page(request, token_form=form)
    days = form.cleaned_data["expires_in"]
    expires_at = timezone.now() + timedelta(days=days) if days else None
    cap = NudgeConfig.from_settings().max_api_tokens_per_user
    with tenant_scope(request.user.pk):
        live = ApiToken.objects.filter(user_id=request.user.pk, revoked_at=None).count()
        if live < cap:
            plaintext = new_api_token(request.user.pk, form.cleaned_data["name"], expires_at)[1]
    if live >= cap:
        form.add_error(
            "name",
            _("You have %(count)s tokens, the most allowed; revoke one first.") % {"count": live},
        )
        return _settings_page(request, token_form=form)
    # Post/redirect/get, so a refresh makes no second token: the plaintext waits in the
    # server-side session (never a cookie) for the one uncached view that pops it.
    request.session[NEW_TOKEN_KEY] = plaintext
    return redirect("portal:api_token_new")


NEW_TOKEN_KEY = "portal_new_api_token"  # noqa: S105 — a session key's name, not a secret


@user_page("GET")
def api_token_new(request: HttpRequest) -> HttpResponse:
    """The new token, once: the first view pops it; a refresh finds it gone."""
    plaintext = request.session.pop(NEW_TOKEN_KEY, None)
    if plaintext is None:
        return redirect("portal:settings")
    response = _settings_page(request, new_token=plaintext)
    response["Cache-Control"] = "no-store"
    return response


@user_page("GET", "POST")
def api_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    user_id = request.user.pk
    with tenant_scope(user_id):
        live = owned(ApiToken.objects.filter(revoked_at=None), user_id, token_id).first()
    token = mine(live, "token")
    named = {"name": token.name, "hint": token.hint}

    def revoke() -> int:
        with tenant_scope(user_id):
            return revoke_api_tokens(user_id, "revoked by the user", timezone.now(), [token_id])

    return confirm_then(
        request,
        "token",
        revoke,
        lambda _revoked: _("Revoked the token “%(name)s” (…%(hint)s); it no longer works.") % named,
        heading=_("Revoke the token “%(name)s” (…%(hint)s)?") % named,
        consequence=_("Anything still using it is refused from now on. This cannot be undone."),
        submit=_("Revoke token"),
        back="portal:settings",
    )
