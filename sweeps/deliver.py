"""The delivery sweep (cron: every minute): expire rows past grace, then keep up to
``NUDGE_SEND_CONCURRENCY`` sends in flight until nothing is due or the budget is spent.

Claimed rows are re-resolved in the owner's scope, wait for their channel's shared slot,
are stamped ``send_started_at`` (fenced), sent on a worker thread outside any transaction
and settled by claim token in grouped flushes. A row whose claimant died mid-send fails
(a duplicate is worse than a missing nudge); a 429 pauses the channel for every process.
Untried rows are handed back at the end; a dead run's claims expire with the lease.
What a run did is its ``DeliverReport``: the summary line people read, and the run log's
counts that health and ``/metrics`` read back.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from accounts.actions import note_permanent_failure
from core.config import NudgeConfig
from core.executor import Executor
from messaging.channels.base import Sender, get_sender
from pacing.pacer import HORIZON, ChannelPacer
from scheduled_sends import subjects
from scheduled_sends.failures import TRANSIENT, FailureKind
from scheduled_sends.lateness import LatenessSummary
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from scheduled_sends.queue.transitions import ClaimedSend, Settlement, Transition
from scheduled_sends.runlog import DeliverCounts, recorded_run
from sweeps import verdicts
from sweeps.verdicts import Delivery, SendAttempt, Verdict, describe_unexpected

logger = logging.getLogger("nudge.deliver")


@dataclass(kw_only=True)
class DeliverReport(DeliverCounts):
    as_of: datetime
    claimed: int = 0
    released: int = 0
    lost_claims: int = 0
    slots_missed: int = 0
    batches: int = 0
    # channel -> messages a second in force when the run ended
    rates: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    latenesses: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    NOT_RECORDED = frozenset({"latenesses", "errors"})  # summed up as lateness figures

    @property
    def ok(self) -> bool:
        return self.lost_claims == 0 and not self.errors

    @property
    def sends_per_second(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def count(self, verdict: Verdict, channel: str = "") -> None:
        """A settled row; with the ``channel`` it was sent on, for health's failed-sends checks."""
        name = {
            Transition.SENT: "sent",
            Transition.SKIPPED: "skipped",
            Transition.FAILED: "failed",
            Transition.RETRY: "retried",
        }[verdict.transition]
        setattr(self, name, getattr(self, name) + 1)
        if not channel:
            return
        if verdict.rate_limited:
            self.rate_limited += 1
            self.rate_limited_by_channel[channel] += 1
        if verdict.transition is Transition.SENT:
            self.sent_by_channel[channel] += 1
        elif verdict.transition is Transition.FAILED:
            self.failures_by_channel.setdefault(channel, Counter())[verdict.failure_kind] += 1
            if verdict.failure_kind == FailureKind.CONFIGURATION:
                self.configuration_errors.setdefault(channel, verdict.problem or verdict.reason)
        elif verdict.transition is Transition.RETRY and not verdict.rate_limited:
            self.failures_by_channel.setdefault(channel, Counter())[TRANSIENT] += 1

    def summary(self) -> str:
        text = (
            f"deliver: claimed {self.claimed}, sent {self.sent}, skipped {self.skipped}, "
            f"retry {self.retried}, failed {self.failed}, expired {self.expired} "
            f"in {self.seconds:.1f}s"
        )
        if self.sent:
            late = LatenessSummary.of(self.latenesses)
            text += (
                f" ({self.sends_per_second:.1f}/s; lateness p50 {late.p50:.1f}s, "
                f"p95 {late.p95:.1f}s, max {late.max:.1f}s)"
            )
        if self.rate_limited:
            text += f", {self.rate_limited} rate-limited (429)"
        if self.rates:
            text += "; rate " + ", ".join(f"{c} {r:.1f}/s" for c, r in sorted(self.rates.items()))
        if self.released:
            text += f", released {self.released} untried"
        if self.lost_claims:
            text += f" — WARNING: {self.lost_claims} settle-ups matched no row (lost claims)"
        if self.errors:
            # What failed the run (and its exit status), not only the user's or provider's.
            text += " — FAILED: " + "; ".join(self.errors)
        return text

    def as_dict(self) -> dict[str, object]:
        late = LatenessSummary.of(self.latenesses)
        return {
            **super().as_dict(),
            "sends_per_second": round(self.sends_per_second, 2),
            "lateness_histogram": late.histogram,
            **late.as_counts(),
        }


FLUSH_ROWS = 64
FLUSH_SECONDS = 0.2
# A scheduled row is stamped and handed to a worker this long before its slot.
DISPATCH_AHEAD_SECONDS = 0.05
# Past its budget, a live run goes on until the next run has started (asked of
# the run log at most this often), or for at most HANDOVER_LIMIT_SECONDS more.
HANDOVER_CHECK_SECONDS = 1.0
HANDOVER_LIMIT_SECONDS = 60.0


class DeliveryRun:
    def __init__(
        self,
        config: NudgeConfig,
        fixed_now: datetime | None,
        report: DeliverReport,
        run_id: int,
    ) -> None:
        self.config = config
        self.fixed_now = fixed_now
        self.report = report
        self.started = time.monotonic()
        self.run_id = run_id
        # A live run hands over to the next; a replay (``--now``) just stops.
        self.hands_over = fixed_now is None
        # Rows are held until the budget ends, plus the handover for a live run.
        handover = HANDOVER_LIMIT_SECONDS if self.hands_over else 0.0
        self.holds_until = self.started + config.run_budget_seconds + handover
        self._taken_over = False
        self._next_handover_check = 0.0
        self.senders: dict[str, Sender] = {}
        self.pacer = ChannelPacer(config)
        # Sends reach the database only through pacing, on the workers' own connections.
        self.pool = Executor(config.send_concurrency, "send", database=False)
        self.waiting: dict[str, list[Delivery]] = {}  # per channel, in claim order
        self.scheduled: list[Delivery] = []  # heap by deadline
        self.in_flight: dict[Future[SendAttempt], Delivery] = {}
        self.settlements: list[Settlement] = []
        self._first_unflushed: float | None = None
        # Rows handed back after a 429 become claimable again at this instant.
        self.retry_claim_at: float | None = None
        self.max_held = max(config.batch_size, 2 * config.send_concurrency)
        self._clock_anchor: datetime = report.as_of
        self._clock_read_at = time.monotonic()

    def sync_clock(self) -> None:
        """Re-read the database clock (once per claim, not once per statement)."""
        if self.fixed_now is None:
            self._clock_anchor = transitions.database_now()
            self._clock_read_at = time.monotonic()

    def at(self, monotonic_instant: float) -> datetime:
        """A monotonic instant on the database's clock (``--now`` when replaying)."""
        if self.fixed_now is not None:
            return self.fixed_now
        return self._clock_anchor + timedelta(seconds=monotonic_instant - self._clock_read_at)

    def now(self) -> datetime:
        """The database clock as last read, advanced by the monotonic clock (no round trip)."""
        return self.at(time.monotonic())

    def taken_over(self) -> bool:
        """Past its budget, a live run claims until a later deliver run is in the run log
        (or nudges would wait through the next one's start-up); the overlap is safe."""
        if time.monotonic() - self.started < self.config.run_budget_seconds:
            return False
        if self._taken_over or not self.hands_over:
            return True
        now = time.monotonic()
        if now >= self._next_handover_check:
            self._next_handover_check = now + HANDOVER_CHECK_SECONDS
            self._taken_over = SweepRun.objects.filter(
                sweep=SweepRun.Sweep.DELIVER, pk__gt=self.run_id
            ).exists()
        return self._taken_over

    def sender(self, channel: str) -> Sender:
        if channel not in self.senders:
            self.senders[channel] = get_sender(channel, self.config)
        return self.senders[channel]

    def close(self) -> None:
        self.pool.close()
        for sender in self.senders.values():
            try:
                sender.close()
            except Exception:
                logger.exception("closing a channel failed")

    def held(self) -> int:
        waiting = sum(len(rows) for rows in self.waiting.values())
        return waiting + len(self.scheduled) + len(self.in_flight)

    def settle(self, row: ClaimedSend, transition: Transition, at: datetime, **fields) -> None:
        self.settlements.append(Settlement(row, transition, at, **fields))
        if self._first_unflushed is None:
            self._first_unflushed = time.monotonic()

    def flush(self, *, force: bool = False) -> None:
        if not self.settlements:
            return
        age = time.monotonic() - (self._first_unflushed or time.monotonic())
        if not force and len(self.settlements) < FLUSH_ROWS and age < FLUSH_SECONDS:
            return
        group, self.settlements, self._first_unflushed = self.settlements, [], None
        matched = transitions.apply(group)
        self.report.lost_claims += sum(1 for s in group if s.row.id not in matched)

    def conclude(self, row: ClaimedSend, verdict: Verdict, at: datetime, channel: str = "") -> None:
        self.settle(
            row,
            verdict.transition,
            at,
            channel=channel,
            message_id=verdict.message_id,
            reason=verdict.reason,
            failure_kind=verdict.failure_kind,
            not_before=at + verdict.wait if verdict.wait is not None else None,
        )
        self.report.count(verdict, channel)
        if verdict.problem and verdict.problem not in self.report.errors:
            self.report.errors.append(verdict.problem)

    def retry_later(self, row: ClaimedSend, reason: str, problem: str = "") -> None:
        """Nothing was sent: retried later; a ``problem`` also fails the run's health."""
        retry = verdicts.retry(reason, self.config.retry_delay, problem=problem)
        self.conclude(row, retry, self.now())

    def run(self) -> None:
        self.report.expired += transitions.expire_past_grace(self.now(), self.config)
        exhausted = False
        while True:
            # Past the budget plus any handover: every row without a slot is handed back.
            stop = time.monotonic() >= self.holds_until
            if stop:
                self.give_back_untried()
            elif (
                not self.taken_over()
                and self.held() < self.max_held
                and (not exhausted or self.retries_claimable())
            ):
                exhausted = self.claim_more()
            self.schedule_waiting()
            self.dispatch_due()
            self.flush()
            if not self.held() and (stop or self.taken_over() or not self.more_to_come(exhausted)):
                break
            self.wait_for_progress()
        self.flush(force=True)

    def more_to_come(self, exhausted: bool) -> bool:
        """More due rows, or 429'd rows due back within the run (never in a replay)."""
        if not exhausted:
            return True
        if self.retry_claim_at is None or not self.hands_over:
            return False
        return self.retry_claim_at < self.holds_until

    def retries_claimable(self) -> bool:
        return self.retry_claim_at is not None and time.monotonic() >= self.retry_claim_at

    def claim_more(self) -> bool:
        """Claim up to the room left; True when the queue had no more due rows."""
        self.flush(force=True)  # rows handed back must be visible to the claim
        limit = min(self.config.batch_size, self.max_held - self.held())
        self.sync_clock()
        batch = transitions.claim_due(self.now(), self.config, limit=limit)
        if self.retries_claimable():
            self.retry_claim_at = None
        if batch:
            self.report.batches += 1
            self.report.claimed += len(batch)
            self.admit(batch)
        return len(batch) < limit

    def admit(self, batch: list[ClaimedSend]) -> None:
        """Settle each claimed row at once, or queue it for its channel's slot."""
        for row in batch:
            if row.send_started_at is not None:
                self.conclude(row, verdicts.INTERRUPTED, self.now())
        fresh = [row for row in batch if row.send_started_at is None]
        try:
            facts = subjects.read_facts(fresh)
            agendas = subjects.read_agendas(fresh)
        except Exception as exc:
            logger.exception("reading the claimed rows' subjects failed")
            for row in fresh:
                self.retry_later(row, f"{type(exc).__name__} while resolving", type(exc).__name__)
            return
        now = self.now()
        for row in fresh:
            try:
                outcome = verdicts.decide(row, facts[row.id], now, self.config, agendas.get(row.id))
            except Exception as exc:
                # One row's bad data must not strand the rest of the batch.
                logger.exception("resolving a claimed row failed", extra={"send_id": row.id})
                self.retry_later(row, f"{type(exc).__name__} while resolving", type(exc).__name__)
                continue
            if isinstance(outcome, Delivery):
                self.waiting.setdefault(outcome.channel, []).append(outcome)
            else:
                self.conclude(row, outcome, now)

    def schedule_waiting(self) -> None:
        """Give waiting rows their channel's shared send slots, no more than free workers
        (a slot reserved for a row stuck behind busy threads would be used late)."""
        free = self.config.send_concurrency - len(self.in_flight) - len(self.scheduled)
        for channel, rows in self.waiting.items():
            if not rows or free <= 0:
                continue
            deadlines = self.pacer.reserve(channel, min(len(rows), free))
            free -= len(deadlines)
            taken, self.waiting[channel] = rows[: len(deadlines)], rows[len(deadlines) :]
            for delivery, deadline in zip(taken, deadlines, strict=True):
                delivery.deadline = self.pacer.chat_ready_at(channel, delivery.address, deadline)
                heapq.heappush(self.scheduled, delivery)

    def dispatch_due(self) -> None:
        """Stamp ``send_started_at`` on every row whose slot has come, then send them."""
        horizon = time.monotonic() + DISPATCH_AHEAD_SECONDS
        due: list[Delivery] = []
        while self.scheduled and self.scheduled[0].deadline <= horizon:
            due.append(heapq.heappop(self.scheduled))
        ready: list[tuple[Delivery, Sender]] = []
        for delivery in due:
            try:
                ready.append((delivery, self.sender(delivery.channel)))
            except Exception as exc:
                # A bad backend setting: nothing was sent, so retry later, loudly.
                logger.exception("building a channel failed", extra={"send_id": delivery.row.id})
                self.retry_later(delivery.row, describe_unexpected(exc), type(exc).__name__)
        if not ready:
            return
        now = self.now()
        marked = transitions.apply(
            [Settlement(o.row, Transition.MARK_SENDING, now, channel=o.channel) for o, _ in ready]
        )
        for delivery, sender in ready:
            if delivery.row.id not in marked:
                # The claim is no longer ours: sending now could duplicate.
                self.report.lost_claims += 1
                continue
            future = self.pool.submit(_send_at, sender, delivery, self.pacer)
            self.in_flight[future] = delivery

    def wait_for_progress(self) -> None:
        """Sleep until a send finishes, a slot opens or a flush is due (bounded)."""
        timeout = FLUSH_SECONDS
        if self.scheduled:
            timeout = min(timeout, max(0.0, self.scheduled[0].deadline - time.monotonic()))
        if self.in_flight:
            done, _ = wait(list(self.in_flight), timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                self.settle_attempt(self.in_flight.pop(future), future.result())
        elif timeout > 0:
            time.sleep(min(timeout, 0.05))

    def give_back_untried(self) -> None:
        """Hand rows without a send slot back to the queue; one whose slot comes within
        ``HORIZON`` still goes (the slot is spent in the shared budget anyway)."""
        keep_until = time.monotonic() + HORIZON.total_seconds()
        untried = [o for rows in self.waiting.values() for o in rows]
        kept = [o for o in self.scheduled if o.deadline <= keep_until]
        untried += [o for o in self.scheduled if o.deadline > keep_until]
        self.waiting.clear()
        self.scheduled = kept
        heapq.heapify(self.scheduled)
        for delivery in untried:
            self.release(delivery, time.monotonic())

    def release(self, delivery: Delivery, instant: float) -> float:
        """Hand a row back untried at ``instant`` (monotonic), claimable again after its
        channel's 429 pause; returns when that pause ends."""
        resume = self.pacer.resume_at(delivery.channel)
        at = self.at(instant)
        not_before = at + timedelta(seconds=resume - instant) if resume > instant else None
        self.settle(delivery.row, Transition.RELEASE, at, not_before=not_before)
        self.report.released += 1
        return resume

    def settle_attempt(self, delivery: Delivery, attempt: SendAttempt) -> None:
        row = delivery.row
        at = self.at(attempt.finished)
        if attempt.slot_missed:
            # Never sent: first in line for a fresh slot, stamped again before it goes.
            self.waiting.setdefault(delivery.channel, []).insert(0, delivery)
            self.report.slots_missed += 1
            return
        if attempt.not_tried:
            resume = max(self.release(delivery, attempt.finished), attempt.finished)
            self.retry_claim_at = max(self.retry_claim_at or 0.0, resume)
            return
        verdict = verdicts.classify(attempt, self.config.retry_delay)
        if verdict.rate_limited and verdict.wait is not None:
            wait_seconds = verdict.wait.total_seconds()
            resume = attempt.finished + wait_seconds
            self.pacer.pause(delivery.channel, wait_seconds)
            self.retry_claim_at = max(self.retry_claim_at or 0.0, resume)
        if verdict.unexpected:
            logger.error(
                "channel raised unexpectedly", exc_info=attempt.error, extra={"send_id": row.id}
            )
        if verdict.transition is Transition.RETRY and not verdict.rate_limited:
            at = self.now()  # a retry's wait runs from now, as a resolve failure's does
        self.conclude(row, verdict, at, channel=delivery.channel)
        if verdict.transition is Transition.SENT:
            self.report.latenesses.append(row.lateness_at(at))
        if verdict.refusal is not None:
            refusal = verdict.refusal
            note_permanent_failure(row.user_id, delivery.channel, refusal.code, str(refusal), at)


def _send_at(sender: Sender, delivery: Delivery, pacer: ChannelPacer) -> SendAttempt:
    """On a worker thread: wait for the row's slot, send, and say how it went."""
    sender.warm_up()
    delay = delivery.deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    with pacer.chat_turn(delivery.channel, delivery.address) as answered:
        if not pacer.take_turn(delivery.channel, delivery.deadline):
            return SendAttempt(finished=time.monotonic(), slot_missed=True)
        if pacer.paused(delivery.channel):
            return SendAttempt(finished=time.monotonic(), not_tried=True)
        try:
            receipt = sender.send(delivery.address, delivery.message)
        except BaseException as exc:  # settled by the run's thread, never lost here
            return SendAttempt(finished=time.monotonic(), error=exc)
        finally:
            answered()
        return SendAttempt(finished=time.monotonic(), receipt=receipt)


def run_deliver(
    now: datetime | None = None,
    *,
    batch_size: int | None = None,
    budget_seconds: float | None = None,
) -> DeliverReport:
    """Deliver everything due now, in bounded batches, within the run's budget."""
    config = NudgeConfig.from_settings()
    if batch_size is not None:
        config = config.replace(batch_size=batch_size)
    if budget_seconds is not None:
        config = config.replace(run_budget_seconds=budget_seconds)
    started = time.monotonic()
    as_of = now or transitions.database_now()
    report = DeliverReport(as_of=as_of)
    with recorded_run(
        SweepRun.Sweep.DELIVER,
        report,
        budget_seconds=config.run_budget_seconds,
        no_error="lost claims",
    ) as run:
        delivery_run = DeliveryRun(config, now, report, run_id=run.pk)
        try:
            delivery_run.run()
        finally:
            delivery_run.close()
            report.rates = dict(delivery_run.pacer.rates)
            report.seconds = time.monotonic() - started
    return report
