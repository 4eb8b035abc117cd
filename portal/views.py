"""The end-user area's home (upcoming, history, quick add) and follow-up pages.

Pages that read tenant rows render inside the user's ``tenant_scope`` (a template's lazy
query runs there too); changes go through ``followups.actions``, outside it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from core.config import NudgeConfig
from followups import actions as followups
from followups.actions import FollowUpChange, FollowUpInvalid
from messaging.whatsapp.inbound import channels_offered
from portal import timeline
from portal.forms import BROWSER_ZONE_ALIASES, FollowUpForm, repeat_words
from portal.language import date_formats, user_page
from portal.templatetags.portal_time import when
from tenancy.scope import tenant_scope

# For the pages' zone detection (a data attribute: CSP allows no un-nonced script).
ZONE_ALIASES_JSON = json.dumps(BROWSER_ZONE_ALIASES)
Row = TypeVar("Row")


def mine(found: Row | None, what: str) -> Row:
    """``found``, or the 404 of a row that is not the user's (or no longer there)."""
    if found is None:
        raise Http404(f"No such {what}.")
    return found


def redirect_saying(
    request: HttpRequest, to: str, text: str, level: int = messages.SUCCESS
) -> HttpResponse:
    """Post/redirect/get: the redirect to ``to``, whose page shows ``text`` once."""
    messages.add_message(request, level, text)
    return redirect(to)


def _refused(form: FollowUpForm, exc: FollowUpInvalid) -> None:
    """A refusal from the follow-up rules, in words, on the field it is about."""
    field = exc.field if exc.field in form.fields else None
    form.add_error(field, exc.in_words())


def _add_follow_up(
    request: HttpRequest, formats: dict[str, str], back: str
) -> tuple[FollowUpForm, HttpResponse | None]:
    """The add form of a page, and the redirect after a successful POST of it, saying
    when the follow-up is due on the person's clock."""
    form = FollowUpForm(request.POST or None, delivery=request.delivery)
    if request.method != "POST" or not form.is_valid():
        return form, None
    now = timezone.now()
    try:
        created = followups.create_follow_up(
            request.user.pk,
            form.cleaned_data["title"],
            form.cleaned_data["due_at"],
            now,
            NudgeConfig.from_settings(),
            form.schedule(),
        )
    except FollowUpInvalid as exc:
        _refused(form, exc)
        return form, None
    due = when(followups.next_due(created, now), formats["time_format"])
    said = _("Added “%(title)s”, due %(due)s.") % {"title": created.title, "due": due}
    return form, redirect_saying(request, back, said)


@user_page("GET", "POST")
def home(request: HttpRequest) -> HttpResponse:
    user_id, delivery = request.user.pk, request.delivery
    formats = date_formats(delivery)
    form, added = _add_follow_up(request, formats, "portal:home")
    if added:
        return added
    now = timezone.now()
    with tenant_scope(user_id):
        return render(
            request,
            "portal/home.html",
            {
                "delivery": delivery,
                "upcoming": timeline.upcoming(user_id, now),
                "history": timeline.history(user_id, now, time_format=formats["time_format"]),
                "form": form,
                "history_days": timeline.HISTORY_DAYS,
                "zone_aliases": ZONE_ALIASES_JSON,
                "offered": channels_offered(),
                **formats,
            },
        )


@user_page("GET", "POST")
def follow_up_list(request: HttpRequest) -> HttpResponse:
    formats = date_formats(request.delivery)
    form, added = _add_follow_up(request, formats, "portal:follow_ups")
    if added:
        return added
    rows = followups.list_follow_ups(request.user.pk, limit=200)
    now = timezone.now()
    for row in rows:  # what the list shows: the next time, and how it repeats
        row.next_due = followups.next_due(row, now)
        row.repeats = repeat_words(row.repeat, row.repeat_weekdays)
    return render(request, "portal/follow_ups.html", {"follow_ups": rows, "form": form, **formats})


@user_page("GET", "POST")
def follow_up_edit(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    user_id = request.user.pk
    found = mine(followups.get_follow_up(user_id, follow_up_id), "follow-up")
    form = FollowUpForm(request.POST or None, delivery=request.delivery, follow_up=found)
    if request.method == "POST" and form.is_valid():
        due_at = form.cleaned_data["due_at"]
        change = FollowUpChange(
            title=form.cleaned_data["title"],
            due_at=None if form.due_kept(due_at) else due_at,  # left as it was: seconds too
            schedule=form.schedule(),
        )
        try:
            followups.change_follow_up(
                user_id, follow_up_id, change, timezone.now(), NudgeConfig.from_settings()
            )
        except FollowUpInvalid as exc:
            _refused(form, exc)
        else:
            said = _("Saved “%(title)s”.") % {"title": form.cleaned_data["title"]}
            return redirect_saying(request, "portal:follow_ups", said)
    return render(request, "portal/follow_up_edit.html", {"form": form})


@user_page("POST")
def follow_up_done(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    done = request.POST.get("done", "1") == "1"
    change = FollowUpChange(done=done)
    changed = followups.change_follow_up(request.user.pk, follow_up_id, change, timezone.now())
    title = {"title": mine(changed, "follow-up").title}
    said = _("“%(title)s” marked done.") if done else _("“%(title)s” reopened.")
    return redirect_saying(request, "portal:follow_ups", said % title)


def confirm_then(
    request: HttpRequest, what: str, act: Callable[[], Any], said: Callable[[Any], str], **page: str
) -> HttpResponse:
    """GET asks before something is deleted or revoked (``page``: the confirm page's heading,
    consequence, submit and back); POST runs ``act`` and says ``said(result)``, or is a 404
    naming ``what`` when ``act`` found nothing."""
    if request.method == "GET":
        return render(request, "portal/confirm.html", page)
    result = act()
    mine(result or None, what)
    return redirect_saying(request, page["back"], said(result))


@user_page("GET", "POST")
def follow_up_delete(request: HttpRequest, follow_up_id: int) -> HttpResponse:
    found = mine(followups.get_follow_up(request.user.pk, follow_up_id), "follow-up")
    title = {"title": found.title}
    return confirm_then(
        request,
        "follow-up",
        lambda: followups.delete_follow_up(request.user.pk, follow_up_id, timezone.now()),
        lambda _deleted: _("Deleted “%(title)s”; its nudges are cancelled.") % title,
        heading=_("Delete “%(title)s”?") % title,
        consequence=_("It is removed, and any nudge still planned for it is not sent."),
        submit=_("Delete follow-up"),
        back="portal:follow_ups",
    )


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
