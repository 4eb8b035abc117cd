"""The support console's view of the queue, delivery settings and the sweep log.

Every view here runs under ``support_scope()`` (see ``nudgeproject.admin_site``),
so querysets see every tenant's rows. Support reads the queue and acts on it
through three fenced actions only; the change form is read-only because a
full-row save could overwrite a deliver run's claim or settle-up.
"""

from __future__ import annotations

import uuid
import zoneinfo
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator

from calendars.models import CalendarEvent, FollowUp
from nudgeproject.console import instant_column, when
from portal.rules import pause_reason
from scheduled_sends.deliver import INTERRUPTED_REASON, UNUSABLE_RECEIPT
from scheduled_sends.models import (
    MAX_LEAD_MINUTES,
    DeliverySettings,
    Kind,
    Outcome,
    ScheduledSend,
    SweepRun,
    default_lead_minutes,
    validate_e164,
)

CONFIRM_TEMPLATE = "admin/scheduled_sends/scheduledsend/confirm_action.html"
STATES = (
    ("pending", "Pending"),
    ("claimed", "Claimed (sending)"),
    ("stuck", "Stuck claim"),
    ("retrying", "Retrying"),
    ("sent", "Sent"),
    ("skipped", "Skipped"),
    ("failed", "Failed"),
    ("expired", "Expired"),
)
PROBLEM_STATES = ("failed", "stuck", "retrying")
MID_SEND_REFUSAL = (
    "its send had started, so it may already have been delivered; "
    "tick 'send again' to release it anyway"
)
MAY_HAVE_REACHED_REFUSAL = (
    "it may already have reached the user; tick 'send again' to retry it anyway"
)


# The failure reasons deliver records when a send's outcome is unknown (see
# docs/OPERATIONS.md, "a user didn't get a nudge"): such a row was not resent
# because the message may have arrived.
UNCONFIRMED_MARKERS = (
    INTERRUPTED_REASON,
    UNUSABLE_RECEIPT,
    "it may have been delivered",
    "answer was unreadable",
)


def delivery_doubt(obj: ScheduledSend) -> str:
    """Why a failed row may nevertheless have reached the user ("" when it cannot have)."""
    if obj.last_error == INTERRUPTED_REASON:
        return (
            "its deliver run died mid-send, so the provider may already have delivered it; "
            "retrying may send it twice (check the provider first)"
        )
    if any(marker in obj.last_error for marker in UNCONFIRMED_MARKERS):
        return (
            "the provider got the request but its answer was lost or unreadable, so it may "
            "already have been delivered; retrying may send it twice (check the provider first)"
        )
    if obj.provider_message_id:
        return (
            f"the provider accepted it (message {obj.provider_message_id}); "
            "retrying may send it twice"
        )
    return ""


def lease() -> timedelta:
    return timedelta(seconds=settings.NUDGE_LEASE_SECONDS)


def grace() -> timedelta:
    return timedelta(minutes=settings.NUDGE_GRACE_MINUTES)


def state_condition(state: str, now: datetime, lease: timedelta) -> Q:
    """The queryset condition for one state of ``ScheduledSend.state(now, lease)``.

    Kept beside the model's method it mirrors; tests check each against it.
    """
    unsettled = Q(outcome__isnull=True)
    cutoff = now - lease
    conditions = {
        "pending": unsettled & Q(claimed_at__isnull=True, attempts=0),
        "retrying": unsettled & Q(claimed_at__isnull=True, attempts__gt=0),
        "claimed": unsettled & Q(claimed_at__gte=cutoff),
        "stuck": unsettled & Q(claimed_at__lt=cutoff),
    }
    if state in conditions:
        return conditions[state]
    if state in Outcome.values:
        return Q(outcome=state)
    raise ValueError(f"unknown state {state!r}")


def as_of(request: HttpRequest) -> datetime:
    """One instant per request, so the filter, ordering and state column agree."""
    return request.__dict__.setdefault("_nudge_as_of", timezone.now())


def attach_subject_titles(rows: Iterable[ScheduledSend]) -> None:
    """Set ``subject_title`` on each row from its event or follow-up, in one query."""
    rows = list(rows)
    ids: dict[str, set[int]] = defaultdict(set)
    for row in rows:
        ids[row.kind].add(row.ref_id)
    # Field columns first, the constant last: the order a UNION needs on both sides.
    events = (
        CalendarEvent.objects.filter(pk__in=ids[Kind.EVENT])
        .annotate(subject_kind=Value(Kind.EVENT.value))
        .values_list("pk", "title", "subject_kind")
        .order_by()
    )
    follow_ups = (
        FollowUp.objects.filter(pk__in=ids[Kind.FOLLOW_UP])
        .annotate(subject_kind=Value(Kind.FOLLOW_UP.value))
        .values_list("pk", "title", "subject_kind")
        .order_by()
    )
    titles: dict[tuple[str, int], str] = {}
    if rows:
        titles = {(kind, pk): title for pk, title, kind in events.union(follow_ups, all=True)}
    for row in rows:
        row.subject_title = titles.get((row.kind, row.ref_id))


class ScheduledSendChangeList(ChangeList):
    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        attach_subject_titles(self.result_list)


class StateFilter(admin.SimpleListFilter):
    """The derived states as queryset conditions."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> tuple:
        return STATES

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in dict(STATES):
            return queryset.filter(state_condition(self.value(), as_of(request), lease()))
        return queryset


def overdue_condition(now: datetime) -> Q:
    """Unsettled, unclaimed rows due longer ago than health's overdue threshold.

    The condition of health's ``overdue_unclaimed`` count, so its sentence on
    the landing page links to exactly the rows it counted.
    """
    overdue = timedelta(seconds=settings.NUDGE_HEALTH_OVERDUE_SECONDS)
    return Q(
        outcome__isnull=True,
        claimed_at__isnull=True,
        fire_at__lte=now - overdue,
        fire_at__gt=now - grace(),
    ) & (Q(not_before__isnull=True) | Q(not_before__lte=now))


class DueFilter(admin.SimpleListFilter):
    """Rows health counts as overdue and unclaimed."""

    title = "due"
    parameter_name = "due"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> tuple:
        return (("overdue", "Overdue, unclaimed"),)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "overdue":
            return queryset.filter(overdue_condition(as_of(request)))
        return queryset


class OwnerFilter(admin.SimpleListFilter):
    """One user's rows, by id: where a user's charts page sends support.

    Offered only once chosen (listing every user would not fit a sidebar); the
    search box finds a user by name.
    """

    title = "owner"
    parameter_name = "owner"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        value = self.value()
        if not (value and value.isdigit()):
            return []
        names = get_user_model().objects.filter(pk=int(value)).values_list("username", flat=True)
        return [(value, next(iter(names), f"user #{value}"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(user_id=int(value))
        return queryset


class SkipReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=200,
        help_text="Stored on the row as 'skipped by support: <reason>'.",
        widget=forms.TextInput(attrs={"size": 60}),
    )


def _owner(obj: ScheduledSend) -> str:
    return obj.user.username


def _user_zone(obj: ScheduledSend) -> str:
    try:
        return obj.user.delivery_settings.timezone or "UTC"
    except ObjectDoesNotExist:
        return "UTC"


@admin.register(ScheduledSend)
class ScheduledSendAdmin(admin.ModelAdmin):
    # Nine columns fit beside the filters at 1440 px without squeezing any.
    list_display = (
        "id",
        "owner",
        "subject_with_kind",
        "fire_at_utc",
        "fire_at_local",
        "state_label",
        "attempts",
        "last_error_short",
        "delivery",
    )
    list_display_links = ("id",)
    list_filter = (
        StateFilter,
        DueFilter,
        OwnerFilter,
        "kind",
        "channel",
        ("fire_at", admin.DateFieldListFilter),
    )
    search_fields = ("user__username", "user__email", "=provider_message_id")
    search_help_text = "Username or e-mail (partial), or a provider message id (exact)."
    list_select_related = ("user", "user__delivery_settings")
    date_hierarchy = "fire_at"
    list_per_page = 50
    actions = ("release_claim", "retry_now", "skip")
    fields = (
        "owner",
        "kind",
        "ref_id",
        "subject",
        "state_label",
        "fire_at_utc",
        "fire_at_local",
        "subject_starts_at_",
        "claimed_at_",
        "claim_token",
        "send_started_at_",
        "sent_at_",
        "outcome",
        "attempts",
        "not_before_",
        "last_error",
        "channel",
        "provider_message_id",
        "delivery_status",
        "delivery_error_code",
        "delivery_updated_at_",
        "created_at_",
    )
    readonly_fields = fields

    subject_starts_at_ = instant_column("subject_starts_at", "subject starts")
    claimed_at_ = instant_column("claimed_at", "claimed at")
    send_started_at_ = instant_column("send_started_at", "send started at")
    sent_at_ = instant_column("sent_at", "sent at")
    not_before_ = instant_column("not_before", "not before")
    delivery_updated_at_ = instant_column("delivery_updated_at", "receipt updated at")
    created_at_ = instant_column("created_at", "created at")

    # --- access ---------------------------------------------------------------
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rows come from the materialize sweep only

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # a deleted row would be materialised again; skip it instead

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        # Model-level "change" gates the actions; an object's form stays read-only.
        if obj is not None:
            return False
        return super().has_change_permission(request)

    # --- list -------------------------------------------------------------------
    def get_queryset(self, request: HttpRequest) -> QuerySet[ScheduledSend]:
        now = as_of(request)
        problem = Q()
        for state in PROBLEM_STATES:
            problem |= state_condition(state, now, lease())
        # Not super(): it would order by problem_rank before that annotation exists.
        return (
            self.model._default_manager.select_related("user", "user__delivery_settings")
            .annotate(
                problem_rank=Case(When(problem, then=0), default=1, output_field=IntegerField()),
                as_of=Value(now),
            )
            .order_by(*self.get_ordering(request))
        )

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("problem_rank", "-fire_at")

    def get_changelist(self, request: HttpRequest, **kwargs):
        return ScheduledSendChangeList

    def get_object(self, request: HttpRequest, object_id: str, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            attach_subject_titles([obj])
        return obj

    @admin.display(description="owner", ordering="user__username")
    def owner(self, obj: ScheduledSend) -> str:
        url = reverse("admin:nudge_user_activity", args=[obj.user_id])
        return format_html('<a href="{}" title="this user\'s charts">{}</a>', url, _owner(obj))

    @admin.display(description="subject")
    def subject(self, obj: ScheduledSend) -> str:
        title = getattr(obj, "subject_title", None)
        if title is None:
            return f"(gone: {obj.get_kind_display().lower()} #{obj.ref_id})"
        return Truncator(title or "(untitled)").chars(60)

    @admin.display(description="subject")
    def subject_with_kind(self, obj: ScheduledSend) -> str:
        if getattr(obj, "subject_title", None) is None:
            return self.subject(obj)
        return f"{obj.get_kind_display()}: {self.subject(obj)}"

    @admin.display(description="delivery")
    def delivery(self, obj: ScheduledSend) -> str:
        """Channel, the provider's receipt and its message id, as far as known."""
        parts = [obj.get_channel_display(), obj.delivery_status, obj.provider_message_id]
        return " · ".join(part for part in parts if part) or "-"

    @admin.display(description="fires", ordering="fire_at")
    def fire_at_utc(self, obj: ScheduledSend) -> str:
        return when(obj.fire_at)

    @admin.display(description="fires (user's zone)", ordering="fire_at")
    def fire_at_local(self, obj: ScheduledSend) -> str:
        zone = _user_zone(obj)
        try:
            local = obj.fire_at.astimezone(zoneinfo.ZoneInfo(zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return f"(unknown zone {zone})"
        return f"{local:%Y-%m-%d %H:%M} {zone}"

    @admin.display(description="state", ordering="problem_rank")
    def state_label(self, obj: ScheduledSend) -> str:
        return obj.state(getattr(obj, "as_of", None) or timezone.now(), lease())

    @admin.display(description="last error")
    def last_error_short(self, obj: ScheduledSend) -> str:
        return Truncator(obj.last_error).chars(60)

    # --- actions ----------------------------------------------------------------
    def _confirm(
        self,
        request: HttpRequest,
        *,
        action: str,
        title: str,
        explanation: str,
        rows: list[tuple[ScheduledSend, str | None]],
        submit: str,
        form: forms.Form | None = None,
    ) -> TemplateResponse:
        """The intermediate page: what will happen to which row, and why not to others."""
        attach_subject_titles(obj for obj, _ in rows)
        doubts = {obj.pk: self._doubt(action, obj) for obj, refusal in rows if refusal is None}
        eligible = [obj for obj, refusal in rows if refusal is None]
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "subtitle": None,
            "opts": self.model._meta,
            "action": action,
            "explanation": explanation,
            "rows": [
                {
                    "obj": obj,
                    "owner": _owner(obj),
                    "subject": self.subject(obj),
                    "fire_at": self.fire_at_utc(obj),
                    "state": obj.state(as_of(request), lease()),
                    "refusal": refusal,
                    "doubt": doubts.get(obj.pk, ""),
                    "send_started": when(obj.send_started_at),
                }
                for obj, refusal in rows
            ],
            "eligible": eligible,
            "count_sentence": _count_sentence(
                selected=len(rows),
                eligible=len(eligible),
                doubtful=sum(1 for doubt in doubts.values() if doubt),
            ),
            "submit": submit,
            "form": form,
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)

    @staticmethod
    def _doubt(action: str, obj: ScheduledSend) -> str:
        """Why acting on a row may send a message the user already has ("" if it cannot)."""
        if action == "release_claim" and obj.send_started_at is not None:
            return "its send had started: it may already have been sent"
        if action == "retry_now":
            return delivery_doubt(obj)
        return ""

    def _refused(self, request: HttpRequest, refusals: list[tuple[ScheduledSend, str]]) -> None:
        if refusals:
            self.message_user(
                request,
                "Not changed: " + "; ".join(f"#{obj.pk} {why}" for obj, why in refusals),
                messages.WARNING,
            )

    @admin.action(permissions=["change"], description="Release stuck claim (claimable now)")
    def release_claim(self, request: HttpRequest, queryset: QuerySet[ScheduledSend]):
        """Make a dead run's claim claimable now, fenced on the token support saw."""
        now = timezone.now()
        cutoff = now - lease()
        rows = [(obj, self._release_refusal(obj, now)) for obj in queryset]
        if request.POST.get("post") != "yes":
            return self._confirm(
                request,
                action="release_claim",
                title="Release stuck claims",
                explanation=(
                    "The deliver run holding each claim is presumed dead. Releasing "
                    "lets the next run claim and send the row. A row whose send had "
                    "started may already have reached the user, so releasing it can "
                    "send it twice: it is released only when you tick 'send again' "
                    "(check the provider first). Left alone, the next deliver run "
                    "settles such a row as failed (interrupted)."
                ),
                rows=rows,
                submit="Yes, release",
            )
        released, refusals = 0, [(obj, why) for obj, why in rows if why]
        for obj, why in rows:
            if why:
                continue
            token = _uuid_or_none(request.POST.get(f"claim_token_{obj.pk}"))
            fence = ScheduledSend.objects.filter(
                pk=obj.pk, claim_token=token, outcome__isnull=True, claimed_at__lt=cutoff
            )
            send_again = request.POST.get(f"send_again_{obj.pk}") == "yes"
            if not send_again:
                if obj.send_started_at is not None:
                    refusals.append((obj, MID_SEND_REFUSAL))
                    continue
                # The dead run might still stamp it; then this is a mid-send row after all.
                fence = fence.filter(send_started_at__isnull=True)
            matched = fence.update(claimed_at=None, claim_token=None, send_started_at=None)
            if not matched:
                refusals.append((obj, "its claim changed after the confirmation page"))
                continue
            released += 1
            message = f"Released stuck claim {token} (support)."
            if obj.send_started_at is not None:
                message += f" Its send had started at {obj.send_started_at:%Y-%m-%d %H:%M:%S}Z."
            self.log_change(request, obj, message)
        if released:
            self.message_user(request, f"Released {released} stuck claim(s).", messages.SUCCESS)
        self._refused(request, refusals)
        return None

    @staticmethod
    def _release_refusal(obj: ScheduledSend, now: datetime) -> str | None:
        state = obj.state(now, lease())
        if state == "stuck":
            return None
        if state == "claimed":
            return "its claim is still live (a deliver run may be sending it)"
        return f"it is {state}, not a stuck claim"

    @admin.action(permissions=["change"], description="Retry failed send now")
    def retry_now(self, request: HttpRequest, queryset: QuerySet[ScheduledSend]):
        """Clear a failed row's outcome so the next deliver run sends it, inside the grace."""
        now = timezone.now()
        rows = [(obj, self._retry_refusal(obj, now)) for obj in queryset]
        if request.POST.get("post") != "yes":
            return self._confirm(
                request,
                action="retry_now",
                title="Retry failed sends now",
                explanation=(
                    f"Each failed row is put back in the queue; the next deliver run "
                    f"sends it. Only rows still inside the {settings.NUDGE_GRACE_MINUTES}"
                    f"-minute grace window after their fire time can be retried."
                ),
                rows=rows,
                submit="Yes, retry",
            )
        retried, refusals = 0, [(obj, why) for obj, why in rows if why]
        for obj, why in rows:
            if why:
                continue
            if delivery_doubt(obj) and request.POST.get(f"send_again_{obj.pk}") != "yes":
                refusals.append((obj, MAY_HAVE_REACHED_REFUSAL))
                continue
            matched = ScheduledSend.objects.filter(
                pk=obj.pk, outcome=Outcome.FAILED, fire_at__gt=now - grace()
            ).update(
                outcome=None,
                last_error="",
                claimed_at=None,
                claim_token=None,
                send_started_at=None,
                not_before=None,
            )
            if not matched:
                refusals.append((obj, "it changed, or left the grace window, meanwhile"))
                continue
            retried += 1
            self.log_change(
                request, obj, f"Retry requested by support (was failed: {obj.last_error[:200]})."
            )
        if retried:
            self.message_user(request, f"Queued {retried} send(s) for retry.", messages.SUCCESS)
        self._refused(request, refusals)
        return None

    @staticmethod
    def _retry_refusal(obj: ScheduledSend, now: datetime) -> str | None:
        if obj.outcome != Outcome.FAILED:
            return f"it is {obj.state(now, lease())}, not failed"
        if obj.fire_at <= now - grace():
            return (
                f"it is past the {settings.NUDGE_GRACE_MINUTES}-minute grace window "
                f"(fired {obj.fire_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC); "
                "a nudge that late is wrong, not late"
            )
        return None

    @admin.action(permissions=["change"], description="Skip (settle without sending)")
    def skip(self, request: HttpRequest, queryset: QuerySet[ScheduledSend]):
        """Settle unsent rows as skipped, with the reason support typed."""
        now = timezone.now()
        rows = [(obj, self._skip_refusal(obj, now)) for obj in queryset]
        form = SkipReasonForm(request.POST if request.POST.get("post") == "yes" else None)
        if not form.is_valid():
            return self._confirm(
                request,
                action="skip",
                title="Skip sends",
                explanation="Each row is settled as skipped and will not be sent.",
                rows=rows,
                submit="Yes, skip",
                form=form,
            )
        reason = f"skipped by support: {form.cleaned_data['reason']}"
        skipped, refusals = 0, [(obj, why) for obj, why in rows if why]
        for obj, why in rows:
            if why:
                continue
            # Unsettled and not under a live claim: a run mid-send cannot be overtaken.
            matched = (
                ScheduledSend.objects.filter(pk=obj.pk, outcome__isnull=True)
                .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - lease()))
                .update(sent_at=now, outcome=Outcome.SKIPPED, last_error=reason)
            )
            if not matched:
                refusals.append((obj, "it was settled or claimed meanwhile"))
                continue
            skipped += 1
            self.log_change(request, obj, reason)
        if skipped:
            self.message_user(request, f"Skipped {skipped} send(s).", messages.SUCCESS)
        self._refused(request, refusals)
        return None

    @staticmethod
    def _skip_refusal(obj: ScheduledSend, now: datetime) -> str | None:
        state = obj.state(now, lease())
        if state == "claimed":
            return "its claim is still live (a deliver run may be sending it)"
        if obj.outcome:
            return f"it is already settled ({obj.outcome})"
        return None


def _count_sentence(*, selected: int, eligible: int, doubtful: int) -> str:
    """How many rows the action will touch, said before it does."""

    def rows(n: int) -> str:
        return f"{n} row" if n == 1 else f"{n} rows"

    if not eligible:
        return f"This will change none of the {rows(selected)} you selected."
    sentence = f"This will change {rows(eligible)} of the {rows(selected)} you selected"
    if eligible < selected:
        sentence += f"; {rows(selected - eligible)} will be left alone (reasons below)"
    if doubtful:
        sentence += (
            f". {rows(doubtful)} may already have reached the user and "
            f"{'is' if doubtful == 1 else 'are'} changed only if you tick 'send again'"
        )
    return sentence + "."


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value or "")
    except ValueError:
        return None


# --- Delivery settings ----------------------------------------------------------


def validate_lead_minutes(value: int) -> None:
    if not 0 <= value <= MAX_LEAD_MINUTES:
        raise ValidationError(
            f"The lead must be between 0 and {MAX_LEAD_MINUTES} minutes (24 hours); "
            f"{value} is outside that."
        )


def validate_known_timezone(value: str) -> None:
    # Stricter than the model's check: ZoneInfo also opens e.g. "posix/…" files.
    if value not in zoneinfo.available_timezones():
        raise ValidationError(
            f"{value!r} is not an IANA time zone (e.g. Europe/Berlin, America/New_York)."
        )


class DeliverySettingsForm(forms.ModelForm):
    # Longer than the column, so a number typed with spaces gets the E.164
    # explanation rather than "at most 16 characters".
    whatsapp_number = forms.CharField(
        max_length=64,
        required=False,
        validators=[validate_e164],
        help_text="E.164: '+', country code, number, digits only (e.g. +14155550100).",
    )
    timezone = forms.CharField(
        max_length=64,
        validators=[validate_known_timezone],
        help_text="An IANA time zone name, e.g. Europe/Berlin.",
    )
    default_lead_minutes = forms.IntegerField(
        label="Default lead (minutes)",
        validators=[validate_lead_minutes],
        initial=default_lead_minutes,
        help_text=f"How long before the event the nudge goes: 0 to {MAX_LEAD_MINUTES} minutes.",
    )

    class Meta:
        model = DeliverySettings
        fields = (
            "user",
            "enabled",
            "channel",
            "whatsapp_number",
            "telegram_chat_id",
            "timezone",
            "default_lead_minutes",
        )
        help_texts = {
            "telegram_chat_id": "A numeric chat id, or @channelusername.",
        }


@admin.register(DeliverySettings)
class DeliverySettingsAdmin(admin.ModelAdmin):
    form = DeliverySettingsForm
    list_display = (
        "user",
        "enabled",
        "channel",
        "timezone",
        "default_lead_minutes",
        "capped_nudges",
        "activity",
        "held_because",
    )
    list_filter = ("enabled", "channel", "paused", "unreachable_channel")
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email")
    raw_id_fields = ("user",)
    # Written by materialise: how many nudges the per-user limits left out.
    CAP_FIELDS = ("capped_nudges", "capped_at_")
    capped_at_ = instant_column("capped_at", "capped at")
    # Set by the user (end-user area), their messages, or a provider: shown, not edited here.
    SELF_SERVICE = (
        "held_because",
        "quiet_start",
        "quiet_end",
        "unreachable_at",
        "whatsapp_opted_in_at",
    )

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> tuple[str, ...]:
        if obj is None:
            return self.CAP_FIELDS
        return ("user", *self.CAP_FIELDS, *self.SELF_SERVICE)

    @admin.display(description="held because")
    def held_because(self, obj: DeliverySettings) -> str:
        held = pause_reason(obj)
        return held.reason if held else ""

    @admin.display(description="nudges")
    def activity(self, obj: DeliverySettings) -> str:
        """The user's charts: look-ahead, lateness and outcomes of their nudges."""
        url = reverse("admin:nudge_user_activity", args=[obj.user_id])
        return format_html('<a href="{}">charts</a>', url)


# --- Sweep run log ---------------------------------------------------------------


@admin.register(SweepRun)
class SweepRunAdmin(admin.ModelAdmin):
    """Read-only: the log is what tells a quiet minute from an outage."""

    list_display = ("started", "sweep", "status", "acted_for", "finished", "summary")
    started = instant_column("started_at", "started")
    acted_for = instant_column("as_of", "acted for")
    finished = instant_column("finished_at", "finished")
    fields = ("sweep", "status", "started", "acted_for", "finished", "summary", "counts", "error")
    readonly_fields = fields
    list_filter = ("sweep", "status")
    date_hierarchy = "started_at"
    ordering = ("-started_at",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
