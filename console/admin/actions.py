"""Support's three actions on queue rows: confirm, call the queue's transition, report.

The confirmation page says which rows will change, which will not and why, and
which may already have reached the user. The transitions carry the fences: a
row whose fence no longer holds is reported as changed meanwhile, never overwritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.template.response import TemplateResponse

from console.admin.rows import as_of, attach_subject_titles, subject_label
from core.config import NudgeConfig
from core.display import plural, when, when_text
from scheduled_sends import failures
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import transitions
from scheduled_sends.queue.states import Outcome, State

CONFIRM_TEMPLATE = "admin/scheduled_sends/scheduledsend/confirm_action.html"
MID_SEND_REFUSAL = (
    "its send had started, so it may already have been delivered; "
    "tick 'send again' to release it anyway"
)
MAY_HAVE_REACHED_REFUSAL = (
    "it may already have reached the user; tick 'send again' to retry it anyway"
)
CONFIGURATION_REFUSAL = (
    "it failed for our channel configuration, and would fail again the same way: "
    "fix the setting its error names (docs/OPERATIONS.md); deliver sends new nudges then"
)


def delivery_doubt(obj: ScheduledSend) -> str:
    """Why a failed row may nevertheless have reached the user ("" when it cannot have)."""
    doubt = failures.doubt(obj.failure_kind)
    if doubt:
        return doubt
    if obj.provider_message_id:
        return (
            f"the provider accepted it (message {obj.provider_message_id}); "
            "retrying may send it twice"
        )
    return ""


class SkipReasonForm(forms.Form):
    reason = forms.CharField(
        max_length=200,
        help_text="Stored on the row as 'skipped by support: <reason>'.",
        widget=forms.TextInput(attrs={"size": 60}),
    )


def _support_action(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    rows: list[tuple[ScheduledSend, str | None]],
    *,
    action: str,
    title: str,
    explanation: str,
    submit: str,
    attempt: Callable[[ScheduledSend, bool], bool],
    meanwhile: str,
    log_message: Callable[[ScheduledSend], str],
    done: str,
    doubt: Callable[[ScheduledSend], str] = lambda obj: "",
    unsure: str = "",
    form: forms.Form | None = None,
) -> TemplateResponse | None:
    """Unconfirmed: the intermediate page, saying what will happen to which row and why
    not to others. Confirmed: attempt each eligible row (its transition, given whether
    support ticked "send again"; False when its fence no longer held: ``meanwhile``), log
    it, say what did and did not. A row in ``doubt`` is refused with ``unsure`` unless
    support ticked its "send again"."""
    confirmed = form.is_valid() if form else request.POST.get("post") == "yes"
    if not confirmed:
        attach_subject_titles(obj for obj, _ in rows)
        eligible = [obj for obj, refusal in rows if refusal is None]
        doubts = {obj.pk: doubt(obj) for obj in eligible}
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": title,
            "subtitle": None,
            "opts": modeladmin.model._meta,
            "action": action,
            "explanation": explanation,
            "rows": [
                {
                    "obj": obj,
                    "subject": subject_label(obj),
                    "fire_at": when(obj.fire_at),
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
            "media": modeladmin.media,
        }
        request.current_app = modeladmin.admin_site.name
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)
    changed, refusals = 0, [(obj, why) for obj, why in rows if why]
    for obj, why in rows:
        if why:
            continue
        send_again = request.POST.get(f"send_again_{obj.pk}") == "yes"
        if doubt(obj) and not send_again:
            refusal = unsure
        else:
            refusal = None if attempt(obj, send_again) else meanwhile
        if refusal:
            refusals.append((obj, refusal))
            continue
        changed += 1
        modeladmin.log_change(request, obj, log_message(obj))
    if changed:
        modeladmin.message_user(request, done.format(n=changed), messages.SUCCESS)
    if refusals:
        modeladmin.message_user(
            request,
            "Not changed: " + "; ".join(f"#{obj.pk} {why}" for obj, why in refusals),
            messages.WARNING,
        )
    return None


@admin.action(permissions=["support"], description="Release stuck claim (claimable now)")
def release_claim(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset):
    """Make a dead run's claim claimable now, fenced on the token support saw."""
    lease = NudgeConfig.from_settings().lease

    def attempt(obj: ScheduledSend, send_again: bool) -> bool:
        token = _uuid_or_none(request.POST.get(f"claim_token_{obj.pk}"))
        return transitions.release_stuck_claim(obj.pk, token, lease, even_mid_send=send_again)

    def log_message(obj: ScheduledSend) -> str:
        message = f"Released stuck claim {obj.claim_token} (support)."
        if obj.send_started_at is not None:
            message += f" Its send had started at {obj.send_started_at:%Y-%m-%d %H:%M:%S}Z."
        return message

    return _support_action(
        modeladmin,
        request,
        [(obj, _release_refusal(obj)) for obj in queryset],
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
        submit="Yes, release",
        attempt=attempt,
        meanwhile="its claim changed after the confirmation page",
        log_message=log_message,
        done="Released {n} stuck claim(s).",
        doubt=lambda obj: (
            "its send had started: it may already have been sent"
            if obj.send_started_at is not None
            else ""
        ),
        unsure=MID_SEND_REFUSAL,
    )


def _release_refusal(obj: ScheduledSend) -> str | None:
    if obj.queue_state == State.STUCK:
        return None
    if obj.queue_state == State.CLAIMED:
        return "its claim is still live (a deliver run may be sending it)"
    return f"it is {obj.queue_state}, not a stuck claim"


@admin.action(permissions=["support"], description="Retry failed send now")
def retry_now(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset):
    """Clear a failed row's outcome so the next deliver run sends it, inside the grace."""
    config = NudgeConfig.from_settings()

    return _support_action(
        modeladmin,
        request,
        [(obj, _retry_refusal(obj, request, config)) for obj in queryset],
        action="retry_now",
        title="Retry failed sends now",
        explanation=(
            "Each failed row is put back in the queue; the next deliver run sends it. "
            f"Only rows still inside the {int(config.grace.total_seconds() // 60)}-minute "
            "grace window after their intended time can be retried."
        ),
        submit="Yes, retry",
        attempt=lambda obj, send_again: transitions.retry_failed(obj.pk, config.grace),
        meanwhile="it changed, or left the grace window, meanwhile",
        log_message=lambda obj: f"Retry requested by support (was failed: {obj.last_error[:200]}).",
        done="Queued {n} send(s) for retry.",
        doubt=delivery_doubt,
        unsure=MAY_HAVE_REACHED_REFUSAL,
    )


def _retry_refusal(obj: ScheduledSend, request: HttpRequest, config: NudgeConfig) -> str | None:
    if obj.outcome != Outcome.FAILED:
        return f"it is {obj.queue_state}, not failed"
    if obj.failure_kind == failures.FailureKind.CONFIGURATION:
        return CONFIGURATION_REFUSAL
    if obj.intended_at <= as_of(request) - config.grace:
        return (
            f"it is past the {int(config.grace.total_seconds() // 60)}-minute grace window "
            f"(meant for {when_text(obj.intended_at, seconds=False)}); "
            "a nudge that late is wrong, not late"
        )
    return None


@admin.action(permissions=["support"], description="Skip (settle without sending)")
def skip(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset):
    """Settle unsent rows as skipped, with the reason support typed."""
    lease = NudgeConfig.from_settings().lease
    form = SkipReasonForm(request.POST if request.POST.get("post") == "yes" else None)
    reason = f"skipped by support: {form.cleaned_data['reason']}" if form.is_valid() else ""

    return _support_action(
        modeladmin,
        request,
        [(obj, _skip_refusal(obj)) for obj in queryset],
        action="skip",
        title="Skip sends",
        explanation="Each row is settled as skipped and will not be sent.",
        submit="Yes, skip",
        attempt=lambda obj, send_again: transitions.skip_unsent(obj.pk, reason, lease),
        meanwhile="it was settled or claimed meanwhile",
        log_message=lambda obj: reason,
        done="Skipped {n} send(s).",
        form=form,
    )


def _skip_refusal(obj: ScheduledSend) -> str | None:
    if obj.queue_state == State.CLAIMED:
        return "its claim is still live (a deliver run may be sending it)"
    if obj.outcome:
        return f"it is already settled ({obj.outcome})"
    return None


def _count_sentence(*, selected: int, eligible: int, doubtful: int) -> str:
    """How many rows the action will touch, said before it does."""
    if not eligible:
        return f"This will change none of the {plural(selected, 'row')} you selected."
    sentence = (
        f"This will change {plural(eligible, 'row')} of the {plural(selected, 'row')} you selected"
    )
    if eligible < selected:
        sentence += f"; {plural(selected - eligible, 'row')} will be left alone (reasons below)"
    if doubtful:
        sentence += (
            f". {plural(doubtful, 'row')} may already have reached the user and "
            f"{'is' if doubtful == 1 else 'are'} changed only if you tick 'send again'"
        )
    return sentence + "."


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value or "")
    except ValueError:
        return None
