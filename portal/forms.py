"""The end-user area's forms. Times are entered in the user's own zone. Length limits are
validators, not ``max_length``: its ``maxlength`` would let a browser cut a long paste unsaid."""

from __future__ import annotations

import re
from datetime import datetime, time
from functools import cache
from importlib import resources

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.utils import timezone
from django.utils.dates import WEEKDAYS_ABBR
from django.utils.formats import date_format
from django.utils.functional import lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from accounts.models import Channel, Clock, DeliverySettings, validate_e164
from accounts.rules import quiet_hours_problem
from calendars.caldav_connect import PRESETS
from core.config import SCHEMA_MAX_LEAD_MINUTES
from core.deployment import console_channel_allowed
from core.zones import zone_of
from followups.actions import TITLE_MAX_CHARS, Schedule, past_time, quick_due
from followups.models import FollowUp
from followups.repeat import Repeat, is_due_at, next_due
from portal import plain_words
from portal.email_change import same_address
from providers.ics import feed_address


@cache
def canonical_zones() -> frozenset[str]:
    """The IANA zones a person picks from: the tz database's own list of one zone per
    region (``zone.tab``), so no aliases ("US/Eastern", "Asia/Calcutta", "GB")."""
    table = resources.files("tzdata.zoneinfo").joinpath("zone.tab").read_text("utf-8")
    return frozenset(
        line.split("\t")[2].strip()
        for line in table.splitlines()
        if line and not line.startswith("#")
    )


# Old names browsers still report (Chrome says "Asia/Calcutta") -> the canonical name.
BROWSER_ZONE_ALIASES = {
    "Asia/Calcutta": "Asia/Kolkata",
    "Asia/Katmandu": "Asia/Kathmandu",
    "Asia/Saigon": "Asia/Ho_Chi_Minh",
    "Asia/Rangoon": "Asia/Yangon",
    "Asia/Dacca": "Asia/Dhaka",
    "Asia/Ulan_Bator": "Asia/Ulaanbaatar",
    "Europe/Kiev": "Europe/Kyiv",
    "Atlantic/Faeroe": "Atlantic/Faroe",
    "America/Godthab": "America/Nuuk",
    "America/Buenos_Aires": "America/Argentina/Buenos_Aires",
    "America/Indianapolis": "America/Indiana/Indianapolis",
    "America/Louisville": "America/Kentucky/Louisville",
    "Pacific/Truk": "Pacific/Chuuk",
    "Pacific/Ponape": "Pacific/Pohnpei",
}


def canonical_zone(name: str) -> str | None:
    """The picker's name for a zone a browser reported; None when it has none."""
    name = BROWSER_ZONE_ALIASES.get(name, name)
    return name if name == "UTC" or name in canonical_zones() else None


def timezone_choices(keep: str = "") -> list[tuple[str, str]]:
    """UTC, then the canonical zones by name; ``keep`` (an account's older choice,
    perhaps an alias) stays listed so its form still saves."""
    names = sorted(canonical_zones() | ({keep} if keep and keep != "UTC" else set()))
    return [("UTC", "UTC"), *((name, name.replace("_", " ")) for name in names)]


class ClockTimeField(forms.TimeField):
    """A time of day on either clock: "21:00", "9:00 pm", "9pm", "9 p.m."."""

    def to_python(self, value):
        if isinstance(value, str):
            value = re.sub(r"\s+", " ", value.strip().lower().replace(".", ""))
            value = re.sub(r"^(\d{1,2})(\d{2})( ?[ap]m)$", r"\1:\2\3", value)
        return super().to_python(value)


def clock_field(label: str, example: str, invalid: str) -> ClockTimeField:
    """An optional time of day, typed on either clock (a browser's time picker follows its
    own locale, not the person's choice); ``example`` ("22:00") is its placeholder."""
    return ClockTimeField(
        required=False,
        label=label,
        input_formats=["%H:%M", "%I:%M %p", "%I:%M%p", "%I %p", "%I%p"],
        error_messages={"invalid": invalid},
        widget=forms.TimeInput(
            attrs={"type": "text", "autocomplete": "off", "placeholder": example}, format="%H:%M"
        ),
    )


def _filled(message: str, **values: object) -> str:
    """``message % values`` in the language active when it is shown (``%`` on a lazy
    string would fix the language when the module loads)."""
    return lazy(lambda: message % values, str)()


# Refusals in plain words, never Django's stock "Select a valid choice. X is not one of
# the available choices."
_lead_words = _filled(
    _("Give a whole number of minutes from 0 to %(max)s."), max=SCHEMA_MAX_LEAD_MINUTES
)
LEAD_ERRORS = dict.fromkeys(
    ("required", "invalid", "min_value", "max_value", "step_size"), _lead_words
)
ZONE_ERRORS = {
    "required": _("Pick your time zone from the list."),
    "invalid_choice": _("That is not a time zone we know. Pick yours from the list."),
}
CHANNEL_ERRORS = {
    "required": _("Pick how nudges reach you."),
    "invalid_choice": _("Pick how nudges reach you from the list."),
}
LANGUAGE_ERRORS = {"invalid_choice": _("Pick a language from the list.")}
CLOCK_ERRORS = {"invalid_choice": _("Pick the 24-hour or the 12-hour clock.")}


class SettingsForm(forms.Form):
    # Their choices depend on the account's settings: ``__init__``.
    channel = forms.ChoiceField(label=_("Send nudges by"), error_messages=CHANNEL_ERRORS)
    timezone = forms.ChoiceField(label=_("Time zone"), error_messages=ZONE_ERRORS)
    # Language and clock are optional: a post without them leaves them as they are.
    language = forms.ChoiceField(
        choices=settings.LANGUAGES,
        label=_("Language"),
        required=False,
        error_messages=LANGUAGE_ERRORS,
    )
    clock = forms.ChoiceField(
        choices=[(Clock.H24, _("24-hour (15:00)")), (Clock.H12, _("12-hour (3:00 PM)"))],
        label=_("Clock"),
        required=False,
        error_messages=CLOCK_ERRORS,
    )
    default_lead_minutes = forms.IntegerField(
        min_value=0,
        max_value=SCHEMA_MAX_LEAD_MINUTES,
        error_messages=LEAD_ERRORS,
        label=_("Nudge me this many minutes before"),
        widget=forms.NumberInput(attrs={"inputmode": "numeric"}),
    )
    quiet_start = clock_field(_("Quiet from"), "22:00", _("Give a time such as 22:00 or 10:00 pm."))
    quiet_end = clock_field(_("until"), "07:00", _("Give a time such as 07:00 or 7:00 am."))
    paused = forms.BooleanField(required=False, label=_("Pause all nudges"))
    agenda_at = clock_field(
        _("Send my agenda at"), "07:30", _("Give a time such as 07:30 or 7:30 am.")
    )

    def __init__(self, *args, delivery: DeliverySettings | None = None, **kwargs) -> None:
        """The form of ``delivery`` (a new account's defaults without one), on its clock; its
        zone and channel stay listed even where no longer offered."""
        self.delivery = delivery = delivery or DeliverySettings()
        kwargs.setdefault("initial", {name: getattr(delivery, name) for name in self.base_fields})
        super().__init__(*args, **kwargs)
        if delivery.clock == Clock.H12:  # shown on the person's clock (either is accepted)
            for field in self.fields.values():
                if isinstance(field, ClockTimeField):
                    example = time.fromisoformat(field.widget.attrs["placeholder"])
                    field.widget.format = "%I:%M %p"
                    field.widget.attrs["placeholder"] = f"{example:%I:%M %p}".lstrip("0")
        self.fields["timezone"].choices = timezone_choices(delivery.timezone)
        # Console prints to the server's log: development only, or while the account has it.
        choices = [
            choice
            for choice in Channel.choices
            if choice[0] != Channel.CONSOLE
            or console_channel_allowed()
            or delivery.channel == Channel.CONSOLE
        ]
        if not delivery.channel:  # a new user: nothing linked yet
            choices.insert(0, ("", _("Not set up yet: link Telegram or WhatsApp below")))
            self.fields["channel"].required = False
        self.fields["channel"].choices = choices

    def clean_channel(self) -> str:
        channel = self.cleaned_data["channel"]
        if channel == Channel.TELEGRAM and not self.delivery.telegram_chat_id:
            raise ValidationError(_("Link Telegram first (below), then choose it here."))
        if channel == Channel.WHATSAPP and not self.delivery.whatsapp_number:
            raise ValidationError(
                _("Confirm a WhatsApp number first (below), then choose it here.")
            )
        return channel

    def clean(self):
        cleaned = super().clean()
        for name in ("language", "clock"):  # not posted: left as they are
            if not cleaned.get(name):
                cleaned.pop(name, None)
        start, end = cleaned.get("quiet_start"), cleaned.get("quiet_end")
        problem = quiet_hours_problem(start, end)
        if problem:
            raise forms.ValidationError(problem)
        return cleaned


# The reminders offered, in minutes before; a value set through the API joins its follow-up's
# list (``FollowUpForm.__init__``).
REMINDER_MINUTES = (0, 5, 10, 15, 30, 60, 120, 1440)
# Django's short day names ("Mon"), numbered from Monday as followups.repeat.WEEKDAY_NAMES.
WEEKDAY_CHOICES = list(WEEKDAYS_ABBR.items())


def repeat_words(repeat: str, weekdays: list[int]) -> str:
    """A few words for the follow-up list ("every Mon, Wed"), in the page's language"""
    if repeat == Repeat.WEEKLY and weekdays:
        names = ", ".join(str(WEEKDAYS_ABBR[d]) for d in sorted(set(weekdays)))
        return gettext("every %(days)s") % {"days": names}
    return {
        Repeat.WEEKLY: gettext("every week"),
        Repeat.DAILY: gettext("every day"),
        Repeat.WEEKDAYS: gettext("every weekday"),
        Repeat.MONTHLY: gettext("every month"),
    }.get(repeat, "")


def _minutes_label(minutes: int) -> str:
    if minutes == 0:
        return gettext("At the time")
    if minutes == 1440:
        return gettext("1 day")
    hours, rest = divmod(minutes, 60)
    if hours and rest:
        return gettext("%(hours)s h %(minutes)s min") % {"hours": hours, "minutes": rest}
    if hours:
        return gettext("%(hours)s h") % {"hours": hours}
    return gettext("%(minutes)s min") % {"minutes": rest}


def quick_choices(clock: str) -> dict[str, str]:
    """The follow-up form's quick choices (``quick_due``) in the active language; the
    mornings at nine on the person's clock: "Tomorrow 9:00 AM"."""
    nine = date_format(datetime(2001, 1, 1, 9, 0), "g:i A" if clock == Clock.H12 else "G:i")
    return {
        "in_1h": gettext("In 1 h"),
        "in_3h": gettext("In 3 h"),
        "tomorrow_morning": gettext("Tomorrow %(time)s") % {"time": nine},
        "monday_morning": gettext("Monday %(time)s") % {"time": nine},
    }


def _ticks(choices: list[tuple[int, str]], label: str) -> forms.TypedMultipleChoiceField:
    return forms.TypedMultipleChoiceField(
        choices=choices,
        coerce=int,
        required=False,
        label=label,
        widget=forms.CheckboxSelectMultiple,
    )


class FollowUpForm(forms.Form):
    """A follow-up: what, when (or a quick choice), how it repeats and when to nudge.
    A quick choice (``quick`` in the POST) sets the due time in the user's zone."""

    title = forms.CharField(
        label=_("What"),
        validators=[MaxLengthValidator(TITLE_MAX_CHARS)],
        help_text=_filled(_("Up to %(limit)s characters."), limit=TITLE_MAX_CHARS),
        error_messages={
            "required": _("Say what to follow up on."),
            "max_length": _(
                "That is %(show_value)s characters; keep it to %(limit_value)s or fewer."
            ),
        },
    )
    due_at = forms.DateTimeField(
        label=_("Due"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={
            "required": _("Say when it is due."),
            "invalid": _("Give the date and time it is due."),
        },
    )
    repeat = forms.ChoiceField(choices=Repeat.choices, required=False, label=_("Repeat"))
    repeat_weekdays = _ticks(WEEKDAY_CHOICES, _("On (weekly)"))
    reminder_minutes = _ticks([], _("Nudge me before"))  # its choices: ``__init__``

    def __init__(
        self, *args, delivery: DeliverySettings, follow_up: FollowUp | None = None, **kwargs
    ) -> None:
        """The form on ``delivery``'s zone and clock; editing, with ``follow_up``'s values."""
        self.follow_up = follow_up
        if follow_up is not None:
            kwargs["initial"] = {name: getattr(follow_up, name) for name in self.base_fields}
            # A repeating one shows its next time (as the list does), not its first, perhaps
            # long past: that one's time of day could not be changed without a new date.
            kwargs["initial"]["due_at"] = next_due(follow_up, timezone.now()) or follow_up.due_at
        super().__init__(*args, **kwargs)
        self.zone = zone_of(delivery.timezone)
        self.quick_choices = quick_choices(delivery.clock)
        offered = {*REMINDER_MINUTES, *(self.initial.get("reminder_minutes") or ())}
        self.fields["reminder_minutes"].choices = [(m, _minutes_label(m)) for m in sorted(offered)]

    def clean(self):
        cleaned = super().clean()
        quick = self.data.get("quick")
        if quick in self.quick_choices:  # it replaces a time typed too, even one refused
            self.errors.pop("due_at", None)
            cleaned["due_at"] = quick_due(quick, timezone.now(), self.zone)
        elif cleaned.get("due_at") is None and "due_at" not in self.errors:
            self.add_error("due_at", _("Pick a time, or one of the quick choices."))
        return cleaned

    def schedule(self) -> Schedule:
        """The repeat rule and reminders as ticked, kept on the wall clock of the zone the
        due time was typed in; a due time left as it was keeps the follow-up's own zone (one
        the API set, or the person's before a move), so the edit does not shift it."""
        kept = self.due_kept(self.cleaned_data.get("due_at"))
        return Schedule(
            repeat=self.cleaned_data.get("repeat") or "",
            repeat_weekdays=self.cleaned_data.get("repeat_weekdays") or [],
            time_zone=None if kept else self.zone.key,
            reminder_minutes=self.cleaned_data.get("reminder_minutes") or [],
        )

    def clean_due_at(self) -> datetime | None:
        due = self.cleaned_data["due_at"]
        if due is None:  # a quick choice, or "pick a time" (clean)
            return None
        if due <= timezone.now() and not self.due_kept(due):
            raise ValidationError(past_time())
        return due

    def due_kept(self, due: datetime | None) -> bool:
        """Editing: ``due`` is the time the form showed, left as it was (to the minute): the
        first time, or an occurrence up to the next one (a form shown before an occurrence
        passed). Such a time is not "in the past", and the rule keeps its own first time."""
        kept = self.follow_up
        if kept is None or due is None:
            return False
        exact = due.replace(second=kept.due_at.second, microsecond=kept.due_at.microsecond)
        if exact == kept.due_at:
            return True
        upcoming = next_due(kept, timezone.now())
        return upcoming is not None and exact <= upcoming and is_due_at(kept, exact)


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        validators=[MaxLengthValidator(80)],
        label=_("Token name"),
        initial="host product",
        error_messages={"max_length": _("Keep the name to %(limit_value)s characters or fewer.")},
    )
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
        label=_("WhatsApp number"),
        help_text=_("With the country code, for example +44 7700 900123."),
        error_messages={"required": _("Enter your WhatsApp number.")},
        widget=forms.TextInput(
            attrs={"inputmode": "tel", "placeholder": "+44 7700 900123", "autocomplete": "tel"}
        ),
    )

    def clean_number(self) -> str:
        """Spaces, dashes, dots and brackets as people write numbers are dropped;
        what is left must be an international number."""
        number = re.sub(r"[\s\-.()]", "", self.cleaned_data["number"])
        try:
            validate_e164(number)
        except ValidationError:
            raise ValidationError(plain_words.phone_number()) from None
        return number


class WhatsAppCodeForm(forms.Form):
    code = forms.RegexField(
        regex=r"^\s*[0-9]{6}\s*$",
        label=_("Code"),
        error_messages={"invalid": _("The code is six digits.")},
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "one-time-code"}),
    )


class FeedAddressField(forms.URLField):
    """A calendar address: ``webcal://`` (what Apple and many sites publish) is the
    same feed over https, so it is read as ``https://``."""

    def to_python(self, value: object) -> str:
        return super().to_python(feed_address(str(value or "")))


class IcsFeedForm(forms.Form):
    url = FeedAddressField(
        validators=[MaxLengthValidator(2000)],
        label=_("Calendar address (ICS)"),
        assume_scheme="https",
        help_text=_("The https:// or webcal:// link your calendar service shows."),
        error_messages={
            "invalid": _("That is not a web address. Copy the calendar's link, e.g. https://…"),
            "max_length": _("That address is too long for a calendar link."),
        },
    )


class CalDavForm(forms.Form):
    """A CalDAV account: the service (a preset or any server), its address where the
    preset has none, the user name and an app-specific password (never shown again)."""

    preset = forms.ChoiceField(
        choices=lambda: [(key, str(preset.label)) for key, preset in PRESETS.items()],
        widget=forms.HiddenInput,
    )
    server_url = forms.CharField(
        validators=[MaxLengthValidator(2000)],
        required=False,
        label=_("Server address"),
        help_text=_("For example https://cloud.example.com"),
    )
    username = forms.CharField(
        validators=[MaxLengthValidator(255)], label=_("User name or e-mail address")
    )
    password = forms.CharField(
        validators=[MaxLengthValidator(255)],
        label=_("App-specific password"),
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )


class CalDavPasswordForm(forms.Form):
    password = forms.CharField(
        validators=[MaxLengthValidator(255)],
        label=_("New app-specific password"),
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )


class AccountEmailForm(forms.Form):
    """A new address, asked for with the current password; it takes effect only when the
    link mailed to it is followed (``portal.email_change``)."""

    email = forms.EmailField(
        label=_("E-mail address"),
        help_text=_(
            "Where a password reset link is sent. A new address takes effect when you "
            "follow the link we mail to it."
        ),
        error_messages={"invalid": _("That is not an e-mail address, e.g. ana@example.com.")},
    )
    password = forms.CharField(
        label=_("Current password"),
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )

    def __init__(self, user, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_email(self) -> str:
        address = self.cleaned_data["email"]
        if same_address(address, self.user.email):
            raise ValidationError(gettext("That is already your address."))
        return address

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        if not self.user.check_password(password):
            raise ValidationError(gettext("That is not your current password."))
        return password
