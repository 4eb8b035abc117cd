"""The end-user area's pages: home (upcoming, history, quick add), follow-ups,
settings (channels, quiet hours, API tokens) and calendars.

Every read and write of tenant rows happens inside the signed-in user's own
``tenant_scope``, opened here per request (and rendered inside it, so a lazy
query in a template still runs in it). Changes that affect the queue call the
plain modules (messaging.addresses, followups.actions, …), which re-materialize the
user after their scope has closed — scopes do not nest.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.actions import ensure_settings, update_settings
from accounts.models import AccountNotice, Channel, DeliverySettings
from calendars.connect import ConnectError, add_ics_feed
from calendars.models import ConnectionStatus
from calendars.views import available as oauth_available
from core.config import NudgeConfig
from core.zones import zone_of
from followups import actions as followups
from followups.actions import FollowUpChange, FollowUpInvalid
from followups.models import FollowUp
from messaging.link_codes import new_telegram_code
from messaging.models import LinkCode, OptInRecord
from messaging.telegram import bot as telegram
from messaging.whatsapp import inbound as whatsapp
from portal import calendar_links, email_change, plain_words, timeline
from portal.forms import (
    BROWSER_ZONE_ALIASES,
    AccountEmailForm,
    ApiTokenForm,
    FollowUpForm,
    IcsFeedForm,
    SettingsForm,
    WhatsAppCodeForm,
    WhatsAppNumberForm,
    canonical_zone,
    repeat_words,
)
from portal.language import date_formats, in_users_language
from portal.models import ApiToken
from portal.signin import client_address, reset_allowed
from portal.tokens import new_api_token, revoke_api_tokens
from tenancy.scope import tenant_scope


def _zone_name(zone) -> str:
    """The zone's IANA name: the wall clock a repeating follow-up keeps."""
    return getattr(zone, "key", "UTC")


def _create_follow_up(request: HttpRequest, form: FollowUpForm, zone) -> FollowUp | None:
    """Validate in the user's zone and create; errors land on the form."""
    with timezone.override(zone):
        if not form.is_valid():
            return None
    try:
        return followups.create_follow_up(
            request.user.pk,
            form.cleaned_data["title"],
            form.cleaned_data["due_at"],
            timezone.now(),
            NudgeConfig.from_settings(),
            form.schedule(_zone_name(zone)),
        )
    except FollowUpInvalid as exc:
        _refused(form, exc)
        return None


def _refused(form: FollowUpForm, exc: FollowUpInvalid) -> None:
    """A refusal from the follow-up rules, in words, on the field it is about."""
    field = exc.field if exc.field in form.fields else None
    form.add_error(field, plain_words.follow_up_error(exc.field, str(exc)))


def _add_follow_up(
    request: HttpRequest, zone, when_format: str, back: str
) -> tuple[FollowUpForm, HttpResponse | None]:
    """The add form of a page, and the redirect after a successful POST of it (saying
    when the follow-up is due, on the person's clock)."""
    form = FollowUpForm(request.POST or None, zone=zone)
    created = _create_follow_up(request, form, zone) if request.method == "POST" else None
    if created is not None:
        # The time a quick choice chose, or a repeating one's first occurrence.
        due = timezone.localtime(followups.next_due(created, timezone.now()), zone)
        messages.success(
            request,
            _("Added “%(title)s”, due %(due)s.")
            % {"title": created.title, "due": date_format(due, when_format)},
        )
        return form, redirect(back)
    return form, None


def _zone_and_formats(user_id: int):
    """The person's zone and date formats (their clock), from one read of their settings."""
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
    return zone_of(delivery.timezone), date_formats(delivery)


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def home(request: HttpRequest) -> HttpResponse:
    user_id = request.user.pk
    zone, formats = _zone_and_formats(user_id)
    form, added = _add_follow_up(request, zone, formats["when_format"], "portal:home")
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
                "history": timeline.history(
                    user_id, now, tz=zone, time_format=date_formats(delivery)["time_format"]
                ),
                "form": form,
                "history_days": timeline.HISTORY_DAYS,
                "zone_aliases": ZONE_ALIASES_JSON,
                **date_formats(delivery),
            },
        )


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def follow_up_list(request: HttpRequest) -> HttpResponse:
    user_id = request.user.pk
    zone, formats = _zone_and_formats(user_id)
    form, added = _add_follow_up(request, zone, formats["when_format"], "portal:follow_ups")
    if added:
        return added
    rows = followups.list_follow_ups(user_id, limit=200)
    now = timezone.now()
    for row in rows:  # what the list shows: the next time, and how it repeats
        row.next_due = followups.next_due(row, now)
        row.repeats = repeat_words(row.repeat, row.repeat_weekdays)
    with timezone.override(zone):
        return render(
            request, "portal/follow_ups.html", {"follow_ups": rows, "form": form, **formats}
        )


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def follow_up_edit(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    user_id = request.user.pk
    found = followups.get_follow_up(user_id, follow_up_id)
    if found is None:
        raise Http404("No such follow-up.")
    zone, _formats = _zone_and_formats(user_id)
    with timezone.override(zone):
        initial = {
            "title": found.title,
            "due_at": timezone.localtime(found.due_at),
            "repeat": found.repeat,
            "repeat_weekdays": found.repeat_weekdays,
            "reminder_minutes": found.reminder_minutes,
        }
        form = FollowUpForm(request.POST or None, initial=initial, zone=zone, keep_due=found.due_at)
        if request.method == "POST" and form.is_valid():
            due_at = form.cleaned_data["due_at"]
            if due_at == found.due_at.replace(second=0, microsecond=0):
                due_at = None  # the form shows minutes: left as it was, seconds and all
            change = FollowUpChange(
                title=form.cleaned_data["title"],
                due_at=due_at,
                schedule=form.schedule(_zone_name(zone)),
            )
            try:
                followups.change_follow_up(
                    user_id, follow_up_id, change, timezone.now(), NudgeConfig.from_settings()
                )
            except FollowUpInvalid as exc:
                _refused(form, exc)
            else:
                messages.success(
                    request, _("Saved “%(title)s”.") % {"title": form.cleaned_data["title"]}
                )
                return redirect("portal:follow_ups")
        return render(request, "portal/follow_up_edit.html", {"form": form, "follow_up": found})


@login_required
@in_users_language
@require_POST
def follow_up_done(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    done = request.POST.get("done", "1") == "1"
    changed = followups.change_follow_up(
        request.user.pk, follow_up_id, FollowUpChange(done=done), timezone.now()
    )
    if changed is None:
        raise Http404("No such follow-up.")
    messages.success(
        request,
        (_("“%(title)s” marked done.") if done else _("“%(title)s” reopened."))
        % {"title": changed.title},
    )
    return redirect("portal:follow_ups")


def _confirm(request: HttpRequest, *, heading: str, consequence: str, submit: str, back: str):
    """The page that asks before something is deleted or revoked, naming it."""
    return render(
        request,
        "portal/confirm.html",
        {"heading": heading, "consequence": consequence, "submit": submit, "back": back},
    )


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def follow_up_delete(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    """GET asks (naming the follow-up), POST deletes and says what went."""
    found = followups.get_follow_up(request.user.pk, follow_up_id)
    if found is None:
        raise Http404("No such follow-up.")
    if request.method == "GET":
        return _confirm(
            request,
            heading=_("Delete “%(title)s”?") % {"title": found.title},
            consequence=_("It is removed, and any nudge still planned for it is not sent."),
            submit=_("Delete follow-up"),
            back="portal:follow_ups",
        )
    if not followups.delete_follow_up(request.user.pk, follow_up_id, timezone.now()):
        raise Http404("No such follow-up.")
    messages.success(
        request, _("Deleted “%(title)s”; its nudges are cancelled.") % {"title": found.title}
    )
    return redirect("portal:follow_ups")


def _settings_page(request: HttpRequest, form: SettingsForm | None = None, **extra) -> HttpResponse:
    user_id = request.user.pk
    now = timezone.now()
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
        with timezone.override(zone_of(delivery.timezone)):
            return render(
                request,
                "portal/settings.html",
                {
                    "delivery": delivery,
                    "form": form
                    or SettingsForm(
                        initial=_initial(delivery),
                        current_channel=delivery.channel,
                        current_zone=delivery.timezone,
                    ),
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
                    "whatsapp_ready": whatsapp.configured(),
                    "zone_aliases": ZONE_ALIASES_JSON,
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
# For the pages' zone detection (a data attribute: CSP allows no un-nonced script).
ZONE_ALIASES_JSON = json.dumps(BROWSER_ZONE_ALIASES)


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
        current = ensure_settings(user_id)
    form = SettingsForm(
        request.POST, current_channel=current.channel, current_zone=current.timezone
    )
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
        messages.success(request, _("Settings saved."))
    return redirect("portal:settings")


def _channel_problem(delivery: DeliverySettings, channel: str) -> str | None:
    if channel == Channel.TELEGRAM and not delivery.telegram_chat_id:
        return _("Link Telegram first (below), then choose it here.")
    if channel == Channel.WHATSAPP and not delivery.whatsapp_number:
        return _("Confirm a WhatsApp number first (below), then choose it here.")
    return None


@login_required
@in_users_language
@require_POST
def use_device_zone(request: HttpRequest) -> HttpResponse:
    """Home's offer to a new user still on the server's UTC: their device's zone
    (detected by the browser), in one press."""
    zone = canonical_zone(request.POST.get("timezone", ""))
    if zone is None:
        messages.error(request, _("That time zone is not known here; choose yours in Settings."))
        return redirect("portal:settings")
    update_settings(request.user.pk, {"timezone": zone}, timezone.now())
    messages.success(
        request, _("Times are now shown in %(zone)s.") % {"zone": zone.replace("_", " ")}
    )
    return redirect("portal:home")


@login_required
@in_users_language
@require_POST
def link_telegram(request: HttpRequest) -> HttpResponse:
    """A fresh one-time link, shown on a page that waits for it to be used: a button
    that opens the bot (on the phone), its QR code (at a desktop), and a check
    that moves on to Settings once the bot has received "/start <code>"."""
    if not settings.TELEGRAM_BOT_USERNAME:
        messages.error(request, _("Telegram is not available on this server."))
        return redirect("portal:settings")
    user_id = request.user.pk
    now = timezone.now()
    config = NudgeConfig.from_settings()
    with tenant_scope(user_id):
        ensure_settings(user_id)
        whatsapp.prune_link_codes(user_id, now, config)
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


@login_required
@in_users_language
@require_GET
@never_cache
def telegram_link_state(request: HttpRequest) -> JsonResponse:
    """What the waiting page polls: has the bot received the link yet?"""
    with tenant_scope(request.user.pk):
        state = telegram.link_state(request.user.pk, timezone.now())
    if state == telegram.LinkState.LINKED:
        messages.success(request, _("Telegram linked: nudges now go there."))
    return JsonResponse({"state": state})


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
    messages.success(request, _("We sent a six-digit code to that number on WhatsApp."))
    return redirect("portal:settings")


@login_required
@in_users_language
@require_POST
def whatsapp_code(request: HttpRequest) -> HttpResponse:
    form = WhatsAppCodeForm(request.POST)
    if form.is_valid() and whatsapp.confirm_code(
        request.user.pk, form.cleaned_data["code"], timezone.now()
    ):
        messages.success(request, _("WhatsApp confirmed: nudges now go there."))
        return redirect("portal:settings")
    if form.is_valid():
        form.add_error("code", _("That code is wrong or has expired. Ask for a new one."))
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
        form.add_error(
            "name",
            _("You have %(count)s tokens, the most allowed; revoke one first.") % {"count": live},
        )
        return _settings_page(request, token_form=form)
    # Post, redirect, get: a refresh must not make a second token. The plaintext
    # waits in the server-side session for exactly one page view, which pops it
    # (never a cookie: sessions are stored in the database) and is not cached.
    request.session[NEW_TOKEN_KEY] = plaintext
    return redirect("portal:api_token_new")


NEW_TOKEN_KEY = "portal_new_api_token"  # noqa: S105 — a session key's name, not a secret


@login_required
@in_users_language
@require_GET
def api_token_new(request: HttpRequest) -> HttpResponse:
    """The new token, once: the first view pops it; a refresh finds it gone."""
    plaintext = request.session.pop(NEW_TOKEN_KEY, None)
    if plaintext is None:
        return redirect("portal:settings")
    response = _settings_page(request, new_token=plaintext)
    response["Cache-Control"] = "no-store"
    return response


def _live_token(user_id: int, token_id: int) -> ApiToken | None:
    if not 0 < token_id <= followups.MAX_ID:
        return None
    with tenant_scope(user_id):
        return ApiToken.objects.filter(user_id=user_id, pk=token_id, revoked_at=None).first()


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def api_token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """GET asks (naming the token), POST revokes and says which."""
    user_id = request.user.pk
    token = _live_token(user_id, token_id)
    if token is None:
        raise Http404("No such token.")
    if request.method == "GET":
        return _confirm(
            request,
            heading=_("Revoke the token “%(name)s” (…%(hint)s)?")
            % {"name": token.name, "hint": token.hint},
            consequence=_("Anything still using it is refused from now on. This cannot be undone."),
            submit=_("Revoke token"),
            back="portal:settings",
        )
    with tenant_scope(user_id):
        revoked = revoke_api_tokens(user_id, "revoked by the user", timezone.now(), [token_id])
    if not revoked:
        raise Http404("No such token.")
    messages.success(
        request,
        _("Revoked the token “%(name)s” (…%(hint)s); it no longer works.")
        % {"name": token.name, "hint": token.hint},
    )
    return redirect("portal:settings")


@login_required
@in_users_language
@require_http_methods(["GET"])
def calendars_page(request: HttpRequest) -> HttpResponse:
    return _calendars_page(request)


def _calendars_page(request: HttpRequest, ics_form: IcsFeedForm | None = None) -> HttpResponse:
    user_id = request.user.pk
    connections = calendar_links.list_connections(user_id)
    with tenant_scope(user_id):
        delivery = ensure_settings(user_id)
    with timezone.override(zone_of(delivery.timezone)):
        return render(
            request,
            "portal/calendars.html",
            {
                "connections": connections,
                "checking": calendar_links.checking(connections),
                "ics_form": ics_form or IcsFeedForm(),
                "NEEDS_REAUTH": ConnectionStatus.NEEDS_REAUTH,
                "ERROR": ConnectionStatus.ERROR,
                "oauth_ready": oauth_available(),
                **date_formats(delivery),
            },
        )


@login_required
@in_users_language
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
            messages.success(request, _("Calendar added: checking it now."))
            return redirect("portal:calendars")
    return _calendars_page(request, ics_form=form)


@login_required
@in_users_language
@require_POST
def calendar_switches(request: HttpRequest, connection_id: int) -> HttpResponse:
    """One calendar's "Nudge me for its events" and "Skip all-day events" switches."""
    changed = calendar_links.set_switches(
        request.user.pk,
        connection_id,
        nudges_on=request.POST.get("nudges_on") == "on",
        skip_all_day=request.POST.get("skip_all_day") == "on",
        now=timezone.now(),
    )
    if changed is None:
        raise Http404("No such calendar.")
    if changed.nudges_on:
        messages.success(request, _("Nudges for %(calendar)s are on.") % {"calendar": changed})
    else:
        messages.success(request, _("Nudges for %(calendar)s are off.") % {"calendar": changed})
    return redirect("portal:calendars")


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
def calendar_disconnect(request: HttpRequest, connection_id: int) -> HttpResponse:
    """GET asks (naming the calendar), POST disconnects and says what happened."""
    if request.method == "GET":
        found = calendar_links.find(request.user.pk, connection_id)
        if found is None:
            raise Http404("No such calendar.")
        return _confirm(
            request,
            heading=_("Disconnect %(calendar)s?") % {"calendar": found},
            consequence=_("Its events are removed and get no more nudges."),
            submit=_("Disconnect"),
            back="portal:calendars",
        )
    result = calendar_links.disconnect(
        request.user.pk, connection_id, timezone.now(), NudgeConfig.from_settings()
    )
    if result is None:
        raise Http404("No such calendar.")
    messages.success(
        request,
        _("Disconnected %(label)s: %(note)s.") % {"label": result.label, "note": result.note},
    )
    return redirect("portal:calendars")


@login_required
@in_users_language
@require_http_methods(["GET", "POST"])
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
            messages.success(
                request, _("Password changed. Your API tokens were revoked; make new ones.")
            )
            return redirect("portal:account")
    # Django's form focuses the old password; here the page opens on the e-mail.
    password_form.fields["old_password"].widget.attrs.pop("autofocus", None)
    return render(
        request,
        "portal/account.html",
        {"email_form": email_form, "password_form": password_form},
    )


def _ask_to_change_email(request: HttpRequest, form: AccountEmailForm) -> bool:
    """Mail the link to the new address and the notice to the old (``email_change``);
    whether it went (the hourly limits of our mails may refuse it, said on the form).

    The answer is the same whether or not another account holds the address."""
    user, new_address = request.user, form.cleaned_data["email"]
    config = NudgeConfig.from_settings()
    if not reset_allowed(new_address, client_address(request), timezone.now(), config):
        form.add_error(
            "email", _("Too many e-mails were asked for in the last hour. Try again later.")
        )
        return False
    token = email_change.link_token(user, new_address)
    link = request.build_absolute_uri(reverse("portal:email_confirm", args=[token]))
    mails = email_change.request_mails(user, new_address, link)
    transaction.on_commit(lambda: email_change.start_mailer(user.pk, mails))
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


def _language_of(user_id: int) -> str:
    with tenant_scope(user_id):
        saved = (
            DeliverySettings.objects.filter(user_id=user_id)
            .values_list("language", flat=True)
            .first()
        )
    return saved or settings.LANGUAGE_CODE


@never_cache
@require_http_methods(["GET", "POST"])
def email_confirm(request: HttpRequest, token: str) -> HttpResponse:
    """The link mailed to a new address: shows the address, changes it on Confirm.

    No sign-in needed (the link may be opened on another device): the signed token
    names the account, and it was asked for with the password."""
    link = email_change.read_link(token)
    if link is not None:
        language = _language_of(link.user.pk)
    elif request.user.is_authenticated:
        language = _language_of(request.user.pk)
    else:
        language = settings.LANGUAGE_CODE
    with translation.override(language):
        if link is None:
            state, address, status = "unusable", "", 400
        elif request.method == "GET":
            state, address, status = "ask", link.new_address, 200
        else:
            old_address = email_change.make_change(link)
            email_change.send_now(email_change.changed_notice(old_address, link.new_address))
            state, address, status = "done", link.new_address, 200
        response = render(
            request,
            "portal/email_confirm.html",
            {"state": state, "address": address},
            status=status,
        )
    response.headers.setdefault("Content-Language", language)
    return response


# The site's icon, drawn inline: no static files server is needed.
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#2454c5"/>'
    '<path d="M9 23V9h3l8 9V9h3v14h-3l-8-9v9z" fill="#fff"/></svg>'
)


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for whatever the page says."""
    response = HttpResponse(FAVICON_SVG, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response
