"""What every management command shares about its command line: bad input is one line
on stderr and exit 2. The types raise ``ArgumentTypeError`` (a ``CommandError`` from an
argparse ``type`` escapes Django's handler); database checks raise ``CommandError``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime


class NudgeCommand(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)

        def one_line_error(message: str) -> None:
            if parser.called_from_command_line:
                parser.exit(2, f"{parser.prog}: error: {' '.join(message.split())}\n")
            raise CommandError(f"Error: {message}")

        parser.error = one_line_error  # type: ignore[method-assign]
        return parser


def instant(value: str) -> datetime:
    """An ISO-8601 instant with an explicit offset (a replay must not guess a zone)."""
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:  # well-formed but impossible, e.g. month 13
        parsed = None
    if parsed is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO-8601 date-time (e.g. 2026-12-02T08:00:00Z)"
        )
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} has no UTC offset; add 'Z' or '+01:00'")
    return parsed


def positive_int(value: str) -> int:
    """A whole number of at least 1 (a batch of 0 is a mistake, not "the default")."""
    return _number(value, int, lambda number: number >= 1, "must be at least 1")


def days_up_to(most: int) -> Callable[[str], int]:
    """A whole number of days from 1 to ``most``: past it, a typo rather than a plan."""

    def days(value: str) -> int:
        return _number(value, int, lambda number: 1 <= number <= most, f"is not 1 to {most} days")

    return days


def non_negative_int(value: str) -> int:
    return _number(value, int, lambda number: number >= 0, "cannot be negative")


def positive_float(value: str) -> float:
    return _number(
        value, float, lambda number: 0 < number < math.inf, "must be a positive number of seconds"
    )


def _number(value: str, kind: type, ok: Callable[[Any], bool], complaint: str) -> Any:
    try:
        number = kind(value)
    except ValueError:
        description = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{value!r} is not {description}") from None
    if not ok(number):
        raise argparse.ArgumentTypeError(f"{value!r} {complaint}")
    return number


def require_users(user_ids: Iterable[int] | None, *, active: bool = True) -> list[int] | None:
    """The ids, sorted, each existing (and active, if ``active``); None ("everyone") stays."""
    if user_ids is None:
        return None
    wanted = sorted(set(user_ids))
    found = dict(get_user_model().objects.filter(pk__in=wanted).values_list("pk", "is_active"))
    missing = [str(pk) for pk in wanted if pk not in found]
    if missing:
        raise CommandError(f"no user with id {', '.join(missing)}")
    inactive = [str(pk) for pk in wanted if active and not found[pk]]
    if inactive:
        raise CommandError(
            f"user {', '.join(inactive)} is not active (only active users are visited)"
        )
    return wanted
