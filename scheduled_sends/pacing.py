"""Send pacing: a channel's rate holds across every deliver process at once.

Several cron runs and workers overlap, so the budget cannot live in one
process's memory. It lives in ``channel_pacing``: per channel, the next free
send instant. A process reserves a run of consecutive slots ``1/rate``
seconds apart — at most ``HORIZON`` ahead, so processes interleave rather
than one hoarding the next minute — in one short statement, and then sends
each message at its slot. Sending at the rate instead of into 429s is what
keeps a burst on time; when a 429 comes anyway, :meth:`ChannelPacer.pause`
pushes the channel's next slot past the provider's ``retry_after`` for every
process.

Slots are instants on the database's clock; each reservation answers that
clock too, so a slot becomes a deadline on this process's monotonic clock
without trusting the host's wall clock. Reservations commit without waiting
for the disk: the budget is coordination, not data, and losing its last
fraction of a second in a server crash only lets one slot be used twice.
A slot this process reaches late (a busy CPU, every worker thread taken) is
not caught up in a burst: a
:class:`SendGate` per channel keeps this process's own sends ``1/rate``
apart at the instant they leave.

Telegram also allows only about one message a second to one chat; that
spacing is kept per process (:meth:`ChannelPacer.chat_ready_at`): one user's
nudges of a minute are ranked apart by the claim's fair order, so they seldom
meet in two processes at once, and a 429 for one chat is handled like any.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from django.db import connection

from core.config import NudgeConfig
from scheduled_sends.queue import statements
from tenancy.scope import unscoped_relaxed_commit

# How far ahead one reservation may reach, in seconds.
HORIZON = timedelta(seconds=1)
# A fresh slot starts this far from now: time to stamp the row and hand it to a worker.
LEAD = timedelta(milliseconds=100)
# A slot reached later than this (or one slot interval, if longer) is not used.
LATE_TOLERANCE = 0.25


class SendGate:
    """Keeps one process's sends on one channel at least ``interval`` apart, from any thread.

    It also tells a slot this process reached too late (:meth:`missed`): that
    slot's time has been given to other processes' next slots, so sending on
    it now would double the channel's rate for a moment. Such a row waits for
    a fresh slot instead.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        # Later than this after its slot, a send would crowd the slots after it;
        # tighter, a busy machine would miss slot after slot and send nothing.
        self.tolerance = max(LATE_TOLERANCE, interval)
        self._lock = threading.Lock()
        self._next_at = 0.0

    def missed(self, deadline: float) -> bool:
        return time.monotonic() - deadline > self.tolerance

    def wait_turn(self) -> None:
        with self._lock:
            now = time.monotonic()
            turn = max(now, self._next_at)
            self._next_at = turn + self.interval
        if turn > now:
            time.sleep(turn - now)


class ChannelPacer:
    """This process's view of the shared per-channel send budgets."""

    def __init__(self, config: NudgeConfig) -> None:
        self.config = config
        self.gates: dict[str, SendGate | None] = {}
        self._known_channels: set[str] = set()
        # channel -> monotonic instant before which asking again is pointless
        self._ask_again_at: dict[str, float] = {}
        self._chat_free_at: dict[tuple[str, str], float] = {}

    def paced(self, channel: str) -> bool:
        return self.config.rate(channel) > 0

    def gate(self, channel: str) -> SendGate | None:
        """The channel's in-process spacing at send time; None when unpaced."""
        if channel not in self.gates:
            rate = self.config.rate(channel)
            self.gates[channel] = SendGate(1 / rate) if rate > 0 else None
        return self.gates[channel]

    def reserve(self, channel: str, wanted: int) -> list[float]:
        """Up to ``wanted`` send deadlines (monotonic seconds), earliest first.

        Unpaced channels get ``wanted`` deadlines of "now". An empty answer
        means the channel's budget is taken for the next ``HORIZON``.
        """
        now = time.monotonic()
        if wanted <= 0:
            return []
        rate = self.config.rate(channel)
        if rate <= 0:
            return [now] * wanted
        if self._ask_again_at.get(channel, 0.0) > now:
            return []
        self._ensure_row(channel)
        # The database read its clock just after this instant; the commit that
        # follows (however slow) must not shift the mapping.
        asked_at = time.monotonic()
        with unscoped_relaxed_commit(), connection.cursor() as cursor:
            cursor.execute(
                statements.RESERVE_SEND_SLOTS,
                {
                    "channel": channel,
                    "wanted": wanted,
                    "horizon": HORIZON,
                    "lead": LEAD,
                    "rate": rate,
                },
            )
            first_slot, slots, db_now = cursor.fetchone()
        first = asked_at + (first_slot - db_now).total_seconds()
        deadlines = [first + i / rate for i in range(slots)]
        if slots < wanted:
            # Taken up to ``first + slots/rate``; ask once that is within reach.
            free_at = first + slots / rate
            self._ask_again_at[channel] = free_at - HORIZON.total_seconds() / 2
        return deadlines

    def pause(self, channel: str, seconds: float) -> None:
        """The provider said 429: no process sends on ``channel`` for ``seconds``."""
        if not self.paced(channel):
            self._ask_again_at[channel] = time.monotonic() + seconds
            return
        self._ensure_row(channel)
        with unscoped_relaxed_commit(), connection.cursor() as cursor:
            cursor.execute(
                statements.PAUSE_CHANNEL, {"channel": channel, "wait": timedelta(seconds=seconds)}
            )
        self._ask_again_at[channel] = time.monotonic() + seconds - HORIZON.total_seconds()

    def chat_ready_at(self, channel: str, address: str, deadline: float) -> float:
        """The deadline pushed back so one chat gets at most one message per interval."""
        key = (channel, address)
        ready = max(deadline, self._chat_free_at.get(key, 0.0))
        self._chat_free_at[key] = ready + self.config.per_chat_interval
        return ready

    def _ensure_row(self, channel: str) -> None:
        if channel in self._known_channels:
            return
        with connection.cursor() as cursor:
            cursor.execute(statements.ENSURE_PACING_ROW, {"channel": channel})
        self._known_channels.add(channel)
