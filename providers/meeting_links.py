"""Which link a nudge may carry: the one place that decides.

Anyone can invite you, so a link from an event would let a stranger put any address into a
message from our bot. A link is kept only when it is ``https`` on the default port, without
userinfo, to a host on ``CALENDAR_MEETING_HOSTS`` (``*.zoom.us`` covers ``zoom.us`` and its
subdomains). The location is stored as written; the message removes every address from it
(:func:`without_links`), so a link refused here cannot come back through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import urlsplit

# Longer than any real meeting link; a nudge with one stays within WhatsApp's 1,600 characters.
MAX_URL_LENGTH = 1024
MAX_LOCATION_LENGTH = 512  # CalendarEvent.location

# Only https can pass, so only https is looked for: a literal start keeps the scan linear
# (a scheme pattern would re-scan every run of letters: quadratic on a hostile feed).
_URL_IN_TEXT = re.compile(r"https://[^\s<>\"'()\[\]{}]+", re.IGNORECASE)
# What a reader's app would turn into a link, with brackets around it: "Room 4 (https://…)".
_LINKISH = re.compile(
    r"[(<\[]?(?:\b[A-Za-z][A-Za-z0-9+.-]{0,31}://|www\.)[^\s<>\"'()\[\]{}]*[)>\]]?", re.I
)
_TRAILING = ".,;:!?"
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` is on the list (``*.example.com`` covers it and its subdomains)."""
    for entry in allowed:
        if entry.startswith("*."):
            base = entry[2:]
            if host == base or host.endswith("." + base):
                return True
        elif host == entry:
            return True
    return False


def _acceptable(url: str, allowed: Iterable[str]) -> bool:
    if len(url) > MAX_URL_LENGTH or not url.isascii() or not url.isprintable():
        return False
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    return (
        parts.scheme.lower() == "https"
        and port in (None, 443)
        and parts.username is None
        and parts.password is None
        and _HOST.fullmatch(host) is not None
        and host_allowed(host, allowed)
    )


def join_url(candidates: Iterable[object], allowed: Iterable[str]) -> str:
    """The first link in ``candidates`` (fields or free text, in order) that may be sent."""
    texts = tuple(c for c in candidates if isinstance(c, str) and c)
    allowed = tuple(allowed)
    if not texts or not allowed:
        return ""
    return _first_acceptable(texts, allowed)


@lru_cache(maxsize=512)
def _first_acceptable(candidates: tuple[str, ...], allowed: tuple[str, ...]) -> str:
    """Cached: every occurrence of a recurring event repeats its series' texts."""
    for candidate in candidates:
        for match in _URL_IN_TEXT.findall(candidate):
            url = match.rstrip(_TRAILING)  # the sentence's punctuation, not the link's
            if _acceptable(url, allowed):
                return url
    return ""


def stored_location(value: object) -> str:
    """A storable location: text only, no NUL, within the column."""
    if not isinstance(value, str):
        return ""
    return value.replace("\x00", "").strip()[:MAX_LOCATION_LENGTH]


def without_links(text: str) -> str:
    """``text`` with every address removed (what a location may show beside a nudge)."""
    return " ".join(_LINKISH.sub(" ", text).split())
