"""The Calendars page: add an ICS feed or a CalDAV account (and choose its calendars,
or give its password again), switch a calendar's nudges, disconnect."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext as _

from calendars.caldav_connect import (
    PRESETS,
    add_account,
    choices_of,
    choose_calendars,
    renew_password,
)
from calendars.connect import ConnectError, add_ics_feed
from calendars.models import ConnectionStatus
from calendars.views import available as oauth_available
from core.config import NudgeConfig
from portal import calendar_links
from portal.forms import CalDavForm, CalDavPasswordForm, IcsFeedForm
from portal.language import date_formats, user_page
from portal.views import confirm_then, mine, redirect_saying


def _calendars_page(
    request: HttpRequest,
    ics_form: IcsFeedForm | None = None,
    caldav_form: CalDavForm | None = None,
) -> HttpResponse:
    user_id = request.user.pk
    connections = calendar_links.list_connections(user_id)
    for item in connections:  # a discovered account's calendars, to choose from
        item.caldav_choices = choices_of(item)
    preset = request.GET.get("caldav", "")
    if caldav_form is None and preset in PRESETS:
        caldav_form = CalDavForm(initial={"preset": preset})
    chosen = PRESETS.get(caldav_form["preset"].value()) if caldav_form is not None else None
    return render(
        request,
        "portal/calendars.html",
        {
            "connections": connections,
            "checking": calendar_links.checking(connections),
            "unreadable": calendar_links.unreadable(connections),
            "ics_form": ics_form or IcsFeedForm(),
            "caldav_presets": PRESETS.values(),
            "caldav_form": caldav_form,
            "caldav_preset": chosen,
            "password_form": CalDavPasswordForm(),
            "NEEDS_REAUTH": ConnectionStatus.NEEDS_REAUTH,
            "oauth_ready": oauth_available(),
            **date_formats(request.delivery),
        },
    )


calendars_page = user_page("GET")(_calendars_page)


@user_page("POST")
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
            said = _("Calendar added: checking it now.")
            return redirect_saying(request, "portal:calendars", said)
    return _calendars_page(request, ics_form=form)


@user_page("POST")
def calendar_add_caldav(request: HttpRequest) -> HttpResponse:
    """Record a CalDAV account; the minute job finds its calendars (no server call here)."""
    form = CalDavForm(request.POST)
    if form.is_valid():
        try:
            add_account(request.user.pk, **form.cleaned_data, config=NudgeConfig.from_settings())
        except ConnectError as exc:
            form.add_error(None, str(exc))
        else:
            said = _("Account added: finding its calendars now.")
            return redirect_saying(request, "portal:calendars", said)
    return _calendars_page(request, caldav_form=form)


@user_page("POST")
def calendar_caldav_choose(request: HttpRequest, connection_id: int) -> HttpResponse:
    try:
        rows = choose_calendars(
            request.user.pk,
            connection_id,
            request.POST.getlist("calendar"),
            config=NudgeConfig.from_settings(),
        )
    except ConnectError as exc:
        return redirect_saying(request, "portal:calendars", str(exc), messages.ERROR)
    mine(rows, "calendar")
    return redirect_saying(request, "portal:calendars", _("Calendars chosen: checking them now."))


@user_page("POST")
def calendar_caldav_password(request: HttpRequest, connection_id: int) -> HttpResponse:
    form = CalDavPasswordForm(request.POST)
    if not form.is_valid():
        asked = _("Give the new app-specific password.")
        return redirect_saying(request, "portal:calendars", asked, messages.ERROR)
    mine(renew_password(request.user.pk, connection_id, form.cleaned_data["password"]), "calendar")
    said = _("Password saved: checking the calendar again.")
    return redirect_saying(request, "portal:calendars", said)


@user_page("POST")
def calendar_switches(request: HttpRequest, connection_id: int) -> HttpResponse:
    """One calendar's "Nudge me for its events" and "Skip all-day events" switches."""
    changed = calendar_links.set_switches(
        request.user.pk,
        connection_id,
        nudges_on=request.POST.get("nudges_on") == "on",
        skip_all_day=request.POST.get("skip_all_day") == "on",
        now=timezone.now(),
    )
    if mine(changed, "calendar").nudges_on:
        said = _("Nudges for %(calendar)s are on.")
    else:
        said = _("Nudges for %(calendar)s are off.")
    return redirect_saying(request, "portal:calendars", said % {"calendar": changed})


@user_page("GET", "POST")
def calendar_disconnect(request: HttpRequest, connection_id: int) -> HttpResponse:
    found = mine(calendar_links.find(request.user.pk, connection_id), "calendar")
    return confirm_then(
        request,
        "calendar",
        lambda: calendar_links.disconnect(request.user.pk, connection_id, timezone.now()),
        lambda note: _("Disconnected %(label)s: %(note)s.") % {"label": found, "note": note},
        heading=_("Disconnect %(calendar)s?") % {"calendar": found},
        consequence=_("Its events are removed and get no more nudges."),
        submit=_("Disconnect"),
        back="portal:calendars",
    )
