"""`manage.py check` (and every command's start) refuses knobs that make the queue unsafe."""

from __future__ import annotations

from django.core import checks

from core.config import NudgeConfig


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
