"""The end-user area's forms. Times are entered in the user's own zone."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, tzinfo
from functools import cache

from django import forms
from django.utils import timezone

from accounts.models import MAX_LEAD_MINUTES, Channel
from calendars.repeat import WEEKDAY_NAMES, Repeat
from core.deployment import console_channel_allowed
from portal.followups import QUICK_CHOICES, TITLE_MAX_CHARS, Schedule, quick_due


@cache
def timezone_choices() -> list[tuple[str, str]]:
    """Every IANA zone this Python knows, by name (a real picker, not free text)."""
    names = sorted(
        name
        for name in zoneinfo.available_timezones()
        if "/" in name and not name.startswith(("Etc/", "SystemV/", "posix/", "right/"))
    )
    return [("UTC", "UTC"), *((name, name.replace("_", " ")) for name in names)]


class SettingsForm(forms.Form):
    channel = forms.ChoiceField(choices=Channel.choices, label="Send nudges by")
    timezone = forms.ChoiceField(choices=timezone_choices, label="Time zone")
    default_lead_minutes = forms.IntegerField(
        min_value=0,
        max_value=MAX_LEAD_MINUTES,
        label="Nudge me this many minutes before",
        widget=forms.NumberInput(attrs={"inputmode": "numeric"}),
    )
    quiet_start = forms.TimeField(
        required=False,
        label="Quiet from",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    quiet_end = forms.TimeField(
        required=False,
        label="until",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    paused = forms.BooleanField(required=False, label="Pause all nudges")

    def __init__(self, *args, current_channel: str = "", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The console channel prints to the server's log: offered in development only
        # (kept in the list while an older account still has it, so the form saves).
        choices = [
            choice
            for choice in Channel.choices
            if choice[0] != Channel.CONSOLE
            or console_channel_allowed()
            or current_channel == "console"
        ]
        if not current_channel:  # a new user: nothing linked yet
            choices.insert(0, ("", "Not set up yet: link Telegram or WhatsApp below"))
            self.fields["channel"].required = False
        self.fields["channel"].choices = choices

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("quiet_start"), cleaned.get("quiet_end")
        if (start is None) != (end is None):
            raise forms.ValidationError("Give both ends of the quiet hours, or neither.")
        return cleaned


# The reminders a person ticks (minutes before); a value set through the API is
# added to the list of the follow-up that has it, so saving the form keeps it.
REMINDER_CHOICES = [
    (0, "At the time"),
    (5, "5 min"),
    (10, "10 min"),
    (15, "15 min"),
    (30, "30 min"),
    (60, "1 h"),
    (120, "2 h"),
    (1440, "1 day"),
]
WEEKDAY_CHOICES = [(number, name.capitalize()) for number, name in enumerate(WEEKDAY_NAMES)]


def _minutes_label(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"


class FollowUpForm(forms.Form):
    """A follow-up: what, when (or a quick choice), how it repeats and when to nudge.

    A quick-choice button (``quick`` in the POST) sets the due time itself, in
    the user's zone, and the typed time is not needed.
    """

    title = forms.CharField(max_length=TITLE_MAX_CHARS, label="What")
    due_at = forms.DateTimeField(
        label="Due",
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    repeat = forms.ChoiceField(choices=Repeat.choices, required=False, label="Repeat")
    repeat_weekdays = forms.TypedMultipleChoiceField(
        choices=WEEKDAY_CHOICES,
        coerce=int,
        required=False,
        label="On (weekly)",
        widget=forms.CheckboxSelectMultiple,
    )
    reminder_minutes = forms.TypedMultipleChoiceField(
        choices=REMINDER_CHOICES,
        coerce=int,
        required=False,
        label="Nudge me before",
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args, zone: tzinfo = UTC, now: datetime | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.zone, self.now = zone, now
        self.quick_choices = QUICK_CHOICES
        kept = set(self.initial.get("reminder_minutes") or ()) - {m for m, _ in REMINDER_CHOICES}
        if kept:
            self.fields["reminder_minutes"].choices = sorted(
                [*REMINDER_CHOICES, *((m, _minutes_label(m)) for m in kept)]
            )

    def clean(self):
        cleaned = super().clean()
        quick = self.data.get("quick")
        if quick in QUICK_CHOICES:
            cleaned["due_at"] = quick_due(quick, self.now or timezone.now(), self.zone)
        elif cleaned.get("due_at") is None and "due_at" not in self.errors:
            self.add_error("due_at", "Pick a time, or one of the quick choices.")
        return cleaned

    def schedule(self, zone_name: str) -> Schedule:
        """The repeat rule and reminders as ticked, kept on ``zone_name``'s wall clock."""
        return Schedule(
            repeat=self.cleaned_data.get("repeat") or "",
            repeat_weekdays=self.cleaned_data.get("repeat_weekdays") or [],
            time_zone=zone_name,
            reminder_minutes=self.cleaned_data.get("reminder_minutes") or [],
        )


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=80, label="Token name", initial="host product")
    # Days; "" is no expiry (the token works until revoked or the password changes).
    expires_in = forms.TypedChoiceField(
        choices=[("", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("365", "In a year")],
        coerce=int,
        empty_value=None,
        required=False,
        initial="",
        label="Expires",
    )


class WhatsAppNumberForm(forms.Form):
    number = forms.CharField(
        max_length=16,
        label="WhatsApp number",
        widget=forms.TextInput(
            attrs={"inputmode": "tel", "placeholder": "+14155550100", "autocomplete": "tel"}
        ),
    )


class WhatsAppCodeForm(forms.Form):
    code = forms.RegexField(
        regex=r"^\s*[0-9]{6}\s*$",
        label="Code",
        error_messages={"invalid": "The code is six digits."},
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "one-time-code"}),
    )


class IcsFeedForm(forms.Form):
    url = forms.URLField(max_length=2000, label="Calendar address (ICS)", assume_scheme="https")
