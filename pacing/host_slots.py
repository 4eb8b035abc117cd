"""Fetch slots per feed host (host and port), learned from its answers and shared by every
process through one row per host (docs/ARCHITECTURE.md, "Connected calendars").
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

from pacing import statements
from tenancy.scope import unscoped_relaxed

# An answer slower than this (seconds) tells of a host that is struggling.
SLOW_ANSWER_SECONDS = 2.0
# A limited answer multiplies a host's slots by this.
HALVING = 0.5
# Answers in flight when a host is overwhelmed come back together: one halving.
HOLD = timedelta(seconds=1)
# After a limited answer, slots grow by one per round trip, not per answer, this long.
CAREFUL = timedelta(minutes=1)
# Never fewer: a slow host still makes progress.
FEWEST = 2.0
# Never more, whatever the processes' concurrency.
MOST = 512.0
# The most of one process's concurrency one host may hold: others always have room.
HOST_SHARE = 0.75
# How often a process shares what it learned and reads what others did ...
SHARE_SECONDS = 1.0
# ... or, when hosts new to it came up, this soon: a thousand small hosts appearing
# one by one cost ten statements a second, not one per fetch.
NEW_HOST_SHARE_SECONDS = 0.1


@dataclass
class _Host:
    slots: float
    careful: bool = False  # limited lately: grow per round trip
    grown: float = 0.0  # since the last share
    limited: bool = False  # since the last share
    read: bool = False  # what the processes learned is known here


class HostSlots:
    """This process's view of the learned slots per host; any thread may report."""

    def __init__(self, start: int, concurrency: int) -> None:
        self.start = float(start)
        self.most = max(start, math.floor(concurrency * HOST_SHARE))  # the setting holds
        self._hosts: dict[str, _Host] = {}
        self._lock = threading.Lock()
        self._shared_at = 0.0

    def limit(self, host: str) -> int:
        """Fetches this process may have in flight to ``host`` now."""
        with self._lock:
            known = self._hosts.setdefault(host, _Host(self.start))
            slots = known.slots
        return max(1, min(self.most, math.floor(slots)))

    def answered(self, host: str, *, seconds: float, limited: bool) -> None:
        """One fetch from ``host`` is done: ``limited`` when it answered 429/5xx or
        failed on the network; it counts as limited too when slower than
        ``SLOW_ANSWER_SECONDS``."""
        with self._lock:
            known = self._hosts.setdefault(host, _Host(self.start))
            if limited or seconds > SLOW_ANSWER_SECONDS:
                if not known.limited:  # what this process sees at once; shared later
                    known.slots = max(FEWEST, known.slots * HALVING)
                known.limited = known.careful = True
            elif not known.limited:
                step = 1.0 / max(known.slots, 1.0) if known.careful else 1.0
                known.grown += step
                known.slots = min(MOST, known.slots + step)

    def share(self, *, force: bool = False) -> None:
        """Send what this process learned since it last shared and take in what every
        process learned; at most every ``SHARE_SECONDS`` unless ``force`` or a host is
        new here (so a host other processes found slow is not flooded first)."""
        now = time.monotonic()
        with self._lock:
            unread = any(not c.read for c in self._hosts.values())
            wait = NEW_HOST_SHARE_SECONDS if unread else SHARE_SECONDS
            if not force and now - self._shared_at < wait:
                return
            self._shared_at = now
            hosts = sorted(h for h, c in self._hosts.items() if c.grown or c.limited or not c.read)
            changes = [self._hosts[h] for h in hosts]
            factors = [HALVING if c.limited else 1.0 for c in changes]
            grown = [0.0 if c.limited else c.grown for c in changes]
            for change in changes:
                change.grown, change.limited = 0.0, False
        if not hosts:
            return
        rows = unscoped_relaxed(
            statements.LEARN_HOST_SLOTS,
            {
                "hosts": hosts,
                "factors": factors,
                "grown": grown,
                "start": self.start,
                "fewest": FEWEST,
                "most": MOST,
                "hold": HOLD,
                "careful": CAREFUL,
            },
        )
        with self._lock:
            for host, slots, careful in rows:
                known = self._hosts[host]
                # Plus what came in meanwhile.
                grown = slots + known.grown
                known.slots = max(FEWEST, slots * HALVING) if known.limited else grown
                known.careful = careful or (known.careful and known.limited)
                known.read = True
