"""A timeline entry as one line of text, for asserting on what History shows."""

from __future__ import annotations

from portal.timeline import Entry


def describe(entry: Entry) -> str:
    """The pill and its sentence, as one line."""
    if entry.status == "due":
        return "due, not sent yet"
    return f"{entry.status}: {entry.words.text}" if entry.words.text else entry.status
