"""The end-user area's forms. Times are entered in the user's own zone."""

from __future__ import annotations

import zoneinfo
from functools import cache

from django import forms
from django.utils.translation import gettext_lazy as _

from accounts.models import MAX_LEAD_MINUTES, Channel, Clock, Language
from core.deployment import console_channel_allowed
from portal.followups import TITLE_MAX_CHARS


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
    channel = forms.ChoiceField(choices=Channel.choices, label=_("Send nudges by"))
    timezone = forms.ChoiceField(choices=timezone_choices, label=_("Time zone"))
    # Each language by its own name; the clock's two ways in the page's language.
    # (Left out of a post, e.g. by an older page, they stay as they are.)
    language = forms.ChoiceField(choices=Language.choices, label=_("Language"), required=False)
    clock = forms.ChoiceField(
        choices=[(Clock.H24, _("24-hour (15:00)")), (Clock.H12, _("12-hour (3:00 PM)"))],
        label=_("Clock"),
        required=False,
    )
    default_lead_minutes = forms.IntegerField(
        min_value=0,
        max_value=MAX_LEAD_MINUTES,
        label=_("Nudge me this many minutes before"),
        widget=forms.NumberInput(attrs={"inputmode": "numeric"}),
    )
    quiet_start = forms.TimeField(
        required=False,
        label=_("Quiet from"),
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    quiet_end = forms.TimeField(
        required=False,
        label=_("until"),
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    paused = forms.BooleanField(required=False, label=_("Pause all nudges"))

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
            choices.insert(0, ("", _("Not set up yet: link Telegram or WhatsApp below")))
            self.fields["channel"].required = False
        self.fields["channel"].choices = choices

    def clean(self):
        cleaned = super().clean()
        start, end = cleaned.get("quiet_start"), cleaned.get("quiet_end")
        if (start is None) != (end is None):
            raise forms.ValidationError(_("Give both ends of the quiet hours, or neither."))
        return cleaned


class FollowUpForm(forms.Form):
    title = forms.CharField(max_length=TITLE_MAX_CHARS, label=_("What"))
    due_at = forms.DateTimeField(
        label=_("Due"),
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=80, label=_("Token name"), initial="host product")
    # Days; "" is no expiry (the token works until revoked or the password changes).
    expires_in = forms.TypedChoiceField(
        choices=[
            ("", _("Never")),
            ("30", _("In 30 days")),
            ("90", _("In 90 days")),
            ("365", _("In a year")),
        ],
        coerce=int,
        empty_value=None,
        required=False,
        initial="",
        label=_("Expires"),
    )


class WhatsAppNumberForm(forms.Form):
    number = forms.CharField(
        max_length=16,
        label=_("WhatsApp number"),
        widget=forms.TextInput(
            attrs={"inputmode": "tel", "placeholder": "+14155550100", "autocomplete": "tel"}
        ),
    )


class WhatsAppCodeForm(forms.Form):
    code = forms.RegexField(
        regex=r"^\s*[0-9]{6}\s*$",
        label=_("Code"),
        error_messages={"invalid": _("The code is six digits.")},
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "one-time-code"}),
    )


class IcsFeedForm(forms.Form):
    url = forms.URLField(max_length=2000, label="Calendar address (ICS)", assume_scheme="https")
