"""The end-user area's pages: home (upcoming, history, quick add), follow-ups,
settings (channels, quiet hours, API tokens) and calendars.

Every read and write of tenant rows happens inside the signed-in user's own
``tenant_scope``, opened here per request (and rendered inside it, so a lazy
query in a template still runs in it). Changes that affect the queue call the
plain modules (portal.account, portal.followups, …), which re-materialise the
user after their scope has closed — scopes do not nest.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods, require_POST

from accounts.actions import ensure_settings, update_settings
from accounts.models import Channel, DeliverySettings
from calendars.connect import ConnectError, add_ics_feed
from calendars.models import ConnectionStatus
from core.config import NudgeConfig
from portal import calendar_links, followups, telegram, timeline, whatsapp
from portal.followups import FollowUpChange, FollowUpInvalid
from portal.forms import (
    ApiTokenForm,
    FollowUpForm,
    IcsFeedForm,
    SettingsForm,
    WhatsAppCodeForm,
    WhatsAppNumberForm,
)
from portal.language import date_formats, in_users_language
from portal.models import AccountNotice, ApiToken, LinkCode, OptInRecord
from portal.tokens import new_api_token, new_telegram_code, revoke_api_tokens
from tenancy.scope import tenant_scope


def _create_follow_up(request: HttpRequest, form: FollowUpForm, zone) -> bool:
    """Validate in the user's zone and create; errors land on the form."""
    with timezone.override(zone):
        if not form.is_valid():
            return False
    try:
        followups.create_follow_up(
            request.user.pk,
            form.cleaned_data["title"],
            form.cleaned_data["due_at"],
            timezone.now(),
            NudgeConfig.from_settings(),
        )
    except FollowUpInvalid as exc:
        form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        return False
    return True


def _add_follow_up(
    request: HttpRequest, zone, back: str
) -> tuple[FollowUpForm, HttpResponse | None]:
    """The add form of a page, and the redirect after a successful POST of it."""
    form = FollowUpForm(request.POST or None)
    if request.method == "POST" and _create_follow_up(request, form, zone):
        messages.success(request, f"Added “{form.cleaned_data['title']}”.")
        return form, redirect(back)
    return form, None


def _zone(user_id: int):
    with tenant_scope(user_id):
        return timeline.zone_of(ensure_settings(user_id).timezone)


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def home(request: HttpRequest) -> HttpResponse:
    user_id = request.user.pk
    zone = _zone(user_id)
    form, added = _add_follow_up(request, zone, "portal:home")
    if added:
        return added
    now = timezone.now()
    with tenant_scope(user_id), timezone.override(zone):
        delivery = ensure_settings(user_id)
        return render(
            request,
            "portal/home.html",
            {
                "delivery": delivery,
                "upcoming": timeline.upcoming(user_id, now),
                "history": timeline.history(user_id, now),
                "form": form,
                "history_days": timeline.HISTORY_DAYS,
                **date_formats(delivery),
            },
        )


@login_required
@require_http_methods(["GET", "POST"])
def follow_up_list(request: HttpRequest) -> HttpResponse:
    user_id = request.user.pk
    zone = _zone(user_id)
    form, added = _add_follow_up(request, zone, "portal:follow_ups")
    if added:
        return added
    rows = followups.list_follow_ups(user_id, limit=200)
    with timezone.override(zone):
        return render(request, "portal/follow_ups.html", {"follow_ups": rows, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def follow_up_edit(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    user_id = request.user.pk
    found = followups.get_follow_up(user_id, follow_up_id)
    if found is None:
        raise Http404("No such follow-up.")
    zone = _zone(user_id)
    with timezone.override(zone):
        initial = {"title": found.title, "due_at": timezone.localtime(found.due_at)}
        form = FollowUpForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            change = FollowUpChange(
                title=form.cleaned_data["title"], due_at=form.cleaned_data["due_at"]
            )
            try:
                followups.change_follow_up(user_id, follow_up_id, change, timezone.now())
            except FollowUpInvalid as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                messages.success(request, "Saved.")
                return redirect("portal:follow_ups")
        return render(request, "portal/follow_up_edit.html", {"form": form, "follow_up": found})


@login_required
@require_POST
def follow_up_done(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    done = request.POST.get("done", "1") == "1"
    changed = followups.change_follow_up(
        request.user.pk, follow_up_id, FollowUpChange(done=done), timezone.now()
    )
    if changed is None:
        raise Http404("No such follow-up.")
    messages.success(request, f"“{changed.title}” marked {'done' if done else 'open'}.")
    return redirect("portal:follow_ups")


@login_required
@require_POST
def follow_up_delete(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    if not followups.delete_follow_up(request.user.pk, follow_up_id, timezone.now()):
        raise Http404("No such follow-up.")
    messages.success(request, "Deleted.")
    return redirect("portal:follow_ups")


def _settings_page(request: HttpRequest, form: SettingsForm | None = None, **extra) -> HttpResponse:
    user_id = request.user.pk
    now = timezone.now()
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        with timezone.override(timeline.zone_of(delivery.timezone)):
            return render(
                request,
                "portal/settings.html",
                {
                    "delivery": delivery,
                    "form": form
                    or SettingsForm(initial=_initial(delivery), current_channel=delivery.channel),
                    "tokens": list(
                        ApiToken.objects.filter(user_id=user_id, revoked_at=None).order_by("pk")
                    ),
                    "now": now,
                    "token_form": extra.pop("token_form", None) or ApiTokenForm(),
                    "number_form": extra.pop("number_form", None) or WhatsAppNumberForm(),
                    "code_form": extra.pop("code_form", None) or WhatsAppCodeForm(),
                    "code_pending": LinkCode.objects.filter(
                        user_id=user_id,
                        channel=Channel.WHATSAPP,
                        used_at=None,
                        expires_at__gt=now,
                    ).exists(),
                    "opt_ins": list(
                        OptInRecord.objects.filter(user_id=user_id).order_by("-recorded_at")[:5]
                    ),
                    "telegram_ready": bool(settings.TELEGRAM_BOT_USERNAME),
                    "confirmed": _confirmed(delivery),
                    "notices": list(
                        AccountNotice.objects.filter(
                            user_id=user_id, created_at__gt=now - NOTICE_DAYS
                        ).order_by("-created_at")[:5]
                    ),
                    **date_formats(delivery),
                    **extra,
                },
            )


NOTICE_DAYS = timedelta(days=30)


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


def _initial(delivery: DeliverySettings) -> dict:
    return {
        "channel": delivery.channel,
        "timezone": delivery.timezone,
        "language": delivery.language,
        "clock": delivery.clock,
        "default_lead_minutes": delivery.default_lead_minutes,
        "quiet_start": delivery.quiet_start,
        "quiet_end": delivery.quiet_end,
        "paused": delivery.paused,
    }


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _settings_page(request)
    user_id = request.user.pk
    with tenant_scope(user_id):
        current_channel = ensure_settings(user_id).channel
    form = SettingsForm(request.POST, current_channel=current_channel)
    if not form.is_valid():
        return _settings_page(request, form)
    data = form.cleaned_data
    changes = {
        name: data[name]
        for name in ("channel", "timezone", "default_lead_minutes", "quiet_start", "quiet_end")
    }
    changes.update({name: data[name] for name in ("language", "clock") if data[name]})
    with tenant_scope(user_id):
        problem = _channel_problem(ensure_settings(user_id), changes["channel"])
    if problem is not None:
        form.add_error("channel", problem)
        return _settings_page(request, form)
    # One write, re-queued once it has committed.
    update_settings(user_id, {**changes, "paused": data["paused"]}, timezone.now())
    with translation.override(changes.get("language") or translation.get_language()):
        messages.success(request, gettext("Settings saved."))
    return redirect("portal:settings")


def _channel_problem(delivery: DeliverySettings, channel: str) -> str | None:
    if channel == Channel.TELEGRAM and not delivery.telegram_chat_id:
        return gettext("Link Telegram first (below), then choose it here.")
    if channel == Channel.WHATSAPP and not delivery.whatsapp_number:
        return gettext("Confirm a WhatsApp number first (below), then choose it here.")
    return None


@login_required
@require_POST
def link_telegram(request: HttpRequest) -> HttpResponse:
    if not settings.TELEGRAM_BOT_USERNAME:
        messages.error(request, "Telegram is not configured on this server.")
        return redirect("portal:settings")
    user_id = request.user.pk
    now = timezone.now()
    with tenant_scope(user_id):
        ensure_settings(user_id)
        config = NudgeConfig.from_settings()
        whatsapp.prune_link_codes(user_id, now, config)
        code = new_telegram_code(user_id, now, config)
    # Opens the bot in Telegram, which sends it "/start <code>".
    return HttpResponseRedirect(telegram.link_url(code))


@login_required
@in_users_language
@require_POST
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
    messages.success(request, "We sent a six-digit code to that number on WhatsApp.")
    return redirect("portal:settings")


@login_required
@in_users_language
@require_POST
def whatsapp_code(request: HttpRequest) -> HttpResponse:
    form = WhatsAppCodeForm(request.POST)
    if form.is_valid() and whatsapp.confirm_code(
        request.user.pk, form.cleaned_data["code"], timezone.now()
    ):
        messages.success(request, "WhatsApp confirmed: nudges now go there.")
        return redirect("portal:settings")
    if form.is_valid():
        form.add_error("code", "That code is wrong or has expired. Ask for a new one.")
    return _settings_page(request, code_form=form)


@login_required
@in_users_language
@require_POST
def api_token_create(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST)
    if not form.is_valid():
        return _settings_page(request, token_form=form)
    days = form.cleaned_data["expires_in"]
    expires_at = timezone.now() + timedelta(days=days) if days else None
    cap = NudgeConfig.from_settings().max_api_tokens_per_user
    with tenant_scope(request.user.pk):
        live = ApiToken.objects.filter(user_id=request.user.pk, revoked_at=None).count()
        plaintext = (
            None
            if live >= cap
            else new_api_token(request.user.pk, form.cleaned_data["name"], expires_at)[1]
        )
    if plaintext is None:
        form.add_error("name", f"You have {live} tokens, the most allowed; revoke one first.")
        return _settings_page(request, token_form=form)
    # Shown once, in this response only: never put into a cookie or the session.
    response = _settings_page(request, new_token=plaintext)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def api_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    user_id = request.user.pk
    if not 0 < token_id <= followups.MAX_ID:
        raise Http404("No such token.")
    with tenant_scope(user_id):
        revoked = revoke_api_tokens(user_id, "revoked by the user", timezone.now(), [token_id])
    if not revoked:
        raise Http404("No such token.")
    messages.success(request, "Token revoked.")
    return redirect("portal:settings")


@login_required
@require_http_methods(["GET"])
def calendars_page(request: HttpRequest) -> HttpResponse:
    return _calendars_page(request)


def _calendars_page(request: HttpRequest, ics_form: IcsFeedForm | None = None) -> HttpResponse:
    user_id = request.user.pk
    connections = calendar_links.list_connections(user_id)
    with timezone.override(_zone(user_id)):
        return render(
            request,
            "portal/calendars.html",
            {
                "connections": connections,
                "checking": calendar_links.checking(connections),
                "ics_form": ics_form or IcsFeedForm(),
                "NEEDS_REAUTH": ConnectionStatus.NEEDS_REAUTH,
                "ERROR": ConnectionStatus.ERROR,
            },
        )


@login_required
@require_POST
def calendar_add_ics(request: HttpRequest) -> HttpResponse:
    form = IcsFeedForm(request.POST)
    if form.is_valid():
        try:
            add_ics_feed(
                request.user.pk, form.cleaned_data["url"], config=NudgeConfig.from_settings()
            )
        except ConnectError as exc:
            form.add_error("url", str(exc))
        else:
            calendar_links.check_in_background(request.user.pk)
            messages.success(request, "Calendar added: checking it now.")
            return redirect("portal:calendars")
    return _calendars_page(request, ics_form=form)


@login_required
@require_POST
def calendar_disconnect(request: HttpRequest, connection_id: int) -> HttpResponse:
    result = calendar_links.disconnect(
        request.user.pk, connection_id, timezone.now(), NudgeConfig.from_settings()
    )
    if result is None:
        raise Http404("No such calendar.")
    messages.success(request, f"Disconnected {result.label}: {result.note}.")
    return redirect("portal:calendars")
