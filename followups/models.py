"""Follow-ups: something a person gave a time to, once or again and again."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from followups.repeat import Repeat
from providers.normalize import MAX_LEADS_PER_EVENT
from tenancy.models import TenantModel


class FollowUp(TenantModel):
    """A repeating follow-up's ``due_at`` is its first time (``followups.repeat``); each
    occurrence is its own instant in the queue, and "done" ends the series."""

    title = models.CharField(max_length=1024)
    due_at = models.DateTimeField()
    done = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    repeat = models.CharField(max_length=8, choices=Repeat.choices, blank=True, default="")
    # Python's weekday numbers (Monday 0), for ``weekly``; empty: the first time's day.
    repeat_weekdays = ArrayField(models.PositiveSmallIntegerField(), default=list, blank=True)
    # Whose wall clock the series keeps across daylight-saving changes.
    repeat_zone = models.CharField(max_length=64, blank=True, default="UTC")
    reminder_minutes = ArrayField(
        models.PositiveIntegerField(),
        default=list,
        blank=True,
        help_text="Nudge this many minutes before, each; empty means the user's default lead.",
    )

    class Meta:
        db_table = "follow_ups"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(repeat__in=Repeat.values), name="follow_ups_repeat_known"
            ),
            # Each lead is a queued row per occurrence: as many as an event may have.
            models.CheckConstraint(
                condition=models.Q(reminder_minutes__len__lte=MAX_LEADS_PER_EVENT),
                name="follow_ups_reminders_capped",
            ),
        ]
        indexes = [
            models.Index(
                fields=["user", "due_at"],
                name="follow_ups_open_due_idx",
                condition=models.Q(done=False),
            ),
            # The few open repeating ones: their first time is no bound on the window.
            models.Index(
                fields=["user"],
                name="follow_ups_open_repeating_idx",
                condition=models.Q(done=False) & ~models.Q(repeat=""),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.title} due {self.due_at:%Y-%m-%d %H:%M}Z"
