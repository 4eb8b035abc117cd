"""Calendar providers: one module per provider, each with the same ``fetch``."""

from __future__ import annotations

from datetime import datetime

from providers.base import ConnectionSnapshot, FetchResult


def fetch(
    snapshot: ConnectionSnapshot,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    """The connection's events overlapping the window, from its provider's module; raise
    ProviderError."""
    from providers import caldav, google, ics, microsoft

    modules = {module.NAME: module for module in (google, microsoft, ics, caldav)}
    if snapshot.provider not in modules:
        raise ValueError(f"unknown calendar provider {snapshot.provider!r}")
    module = modules[snapshot.provider]
    return module.fetch(snapshot, now=now, window_start=window_start, window_end=window_end)
