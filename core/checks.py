"""`manage.py check` (and every command's start) refuses knobs that make the queue unsafe."""

from __future__ import annotations

import os

from django.core import checks

from core.config import KNOBS, TUNING_VARIABLE, NudgeConfig


@checks.register()
def nudge_settings_are_valid(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """``NudgeConfig``'s validation, said at start-up rather than by the first sweep."""
    try:
        problems = NudgeConfig.from_settings(validate=False).problems()
    except (TypeError, ValueError, AttributeError) as exc:  # missing, or of the wrong type
        problems = [f"a NUDGE_/CALENDAR_/ICS_ setting is missing or of the wrong type: {exc}"]
    return [
        checks.Error(problem, hint="See the settings table in docs/OPERATIONS.md.", id="nudge.E001")
        for problem in problems
    ]


@checks.register()
def no_tuning_in_the_environment(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Internal tuning is not read from the environment: say so rather than ignore it."""
    if TUNING_VARIABLE in os.environ:
        return []
    stray = [knob.setting for knob in KNOBS if not knob.public and knob.setting in os.environ]
    return [
        checks.Warning(
            f"{name} is set in the environment, but it is internal tuning, not a setting: "
            "it is ignored",
            hint=f"The settings are in docs/OPERATIONS.md; tests change tuning through "
            f"{TUNING_VARIABLE}.",
            id="nudge.W002",
        )
        for name in stray
    ]
