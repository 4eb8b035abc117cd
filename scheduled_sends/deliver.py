"""The delivery sweep (cron: every minute).

One run: settle rows that fell past grace as ``expired``; then, until
nothing is due or the run's budget is spent, claim a bounded batch (one
statement, oldest first) and deliver each row:

1. a row whose previous claimant died mid-send is settled ``failed`` — the
   provider may already have the message, and a duplicate nudge is worse
   than a missing one that support can see;
2. re-enter the owner's ``tenant_scope`` and re-resolve the subject and the
   channel (still there, still at this time, not done, nudges still on);
3. fenced ``send_started_at`` stamp, then the send, outside any transaction;
4. settle, fenced by the claim token: sent, skipped, retry, or failed.

A run that never comes back releases nothing; its claims expire after the
lease. Rows it claimed but did not try (budget spent, channel rate limited)
are handed back at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from calendars.models import CalendarEvent, ConnectionStatus, EventStatus, FollowUp
from scheduled_sends import claim
from scheduled_sends.channels.base import (
    Channel,
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    SendError,
    TransientSendError,
    UnconfirmedSendError,
    get_channel,
)
from scheduled_sends.claim import ClaimedSend
from scheduled_sends.config import QueueConfig
from scheduled_sends.messages import compose
from scheduled_sends.models import DeliverySettings, Kind, SweepRun
from scheduled_sends.runlog import recorded_run
from tenancy.scope import tenant_scope

logger = logging.getLogger("nudge.deliver")

UNUSABLE_RECEIPT = (
    "the channel accepted the message but returned no usable message id; "
    "it may have been delivered, so it is not resent"
)
INTERRUPTED_REASON = (
    "delivery was interrupted mid-send (the worker died); not resent, to avoid a duplicate"
)


def describe_unexpected(exc: BaseException) -> str:
    """``Type: message`` for last_error, even for an exception whose str() fails."""
    try:
        text = str(exc)
    except Exception:
        text = "(unprintable)"
    return f"{type(exc).__name__}: {text}"[:1000]


@dataclass(frozen=True)
class Delivery:
    """A resolved nudge: where it goes and what it says."""

    channel: str
    address: str
    message: NudgeMessage


@dataclass(frozen=True)
class Skip:
    """Nothing worth saying: the row is settled ``skipped`` with this reason."""

    reason: str


@dataclass(frozen=True)
class Undeliverable:
    """A permanent problem on our side (e.g. no number configured): ``failed``."""

    reason: str


def _resolve_subject(row: ClaimedSend) -> tuple[str, datetime] | Skip:
    """The subject's (title, start) if it still deserves this nudge."""
    if row.kind == Kind.EVENT:
        event = (
            CalendarEvent.objects.filter(pk=row.ref_id, user_id=row.user_id)
            .select_related("connection")
            .first()
        )
        if event is None:
            return Skip("event no longer in the calendar")
        if event.status == EventStatus.CANCELLED:
            return Skip("event cancelled")
        if event.declined:
            return Skip("event declined")
        if event.all_day:
            return Skip("all-day event")
        if event.connection.status == ConnectionStatus.NEEDS_REAUTH:
            return Skip("calendar needs re-authorisation")
        return event.title, event.starts_at
    follow_up = FollowUp.objects.filter(pk=row.ref_id, user_id=row.user_id).first()
    if follow_up is None:
        return Skip("follow-up deleted")
    if follow_up.done:
        return Skip("follow-up already done")
    return follow_up.title, follow_up.due_at


def resolve(
    row: ClaimedSend, now: datetime, config: QueueConfig
) -> Delivery | Skip | Undeliverable:
    """Everything delivery needs to know about the row's owner, read in their scope."""
    with tenant_scope(row.user_id):
        delivery = DeliverySettings.objects.filter(user_id=row.user_id).first()
        if delivery is None or not delivery.enabled:
            return Skip("nudges are turned off for this user")
        subject = _resolve_subject(row)
        if isinstance(subject, Skip):
            return subject
        title, starts_at = subject
        if starts_at != row.subject_starts_at:
            return Skip("subject moved; its new time has its own nudge")
        if starts_at <= now:
            return Skip("subject already begun")
        address = delivery.address()
        if not address:
            return Undeliverable(f"no address configured for the {delivery.channel} channel")
        message = compose(
            kind=row.kind,
            title=title,
            starts_at=starts_at,
            now=now,
            tz_name=delivery.timezone,
            valid_until=row.fire_at + config.grace,
        )
        return Delivery(channel=delivery.channel, address=address, message=message)


@dataclass
class DeliverReport:
    as_of: datetime
    claimed: int = 0
    sent: int = 0
    skipped: int = 0
    retried: int = 0
    failed: int = 0
    expired: int = 0
    released: int = 0
    lost_claims: int = 0
    batches: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.lost_claims == 0 and not self.errors

    def summary(self) -> str:
        text = (
            f"deliver: claimed {self.claimed}, sent {self.sent}, skipped {self.skipped}, "
            f"retry {self.retried}, failed {self.failed}, expired {self.expired} "
            f"in {self.seconds:.1f}s"
        )
        if self.released:
            text += f", released {self.released} untried"
        if self.lost_claims:
            text += f" — WARNING: {self.lost_claims} settle-ups matched no row (lost claims)"
        return text

    def as_dict(self) -> dict[str, object]:
        return {
            "as_of": self.as_of.isoformat(),
            "claimed": self.claimed,
            "sent": self.sent,
            "skipped": self.skipped,
            "retried": self.retried,
            "failed": self.failed,
            "expired": self.expired,
            "released": self.released,
            "lost_claims": self.lost_claims,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
            "ok": self.ok,
        }


class DeliveryRun:
    """One deliver run's state: its clock, budget, channels and counts."""

    def __init__(
        self, config: QueueConfig, fixed_now: datetime | None, report: DeliverReport
    ) -> None:
        self.config = config
        self.fixed_now = fixed_now
        self.report = report
        self.started = time.monotonic()
        self.channels: dict[str, Channel] = {}
        self.paused_until: dict[str, datetime] = {}
        self._clock_anchor: datetime = report.as_of
        self._clock_read_at = time.monotonic()

    def sync_clock(self) -> None:
        """Re-read the database clock (once per batch, not once per statement)."""
        if self.fixed_now is None:
            self._clock_anchor = claim.database_now()
            self._clock_read_at = time.monotonic()

    def now(self) -> datetime:
        """The fixed ``--now`` of a replay, else the database clock as last read,
        advanced by this process's monotonic clock: one clock for every worker,
        without a round trip per row."""
        if self.fixed_now is not None:
            return self.fixed_now
        return self._clock_anchor + timedelta(seconds=time.monotonic() - self._clock_read_at)

    def budget_spent(self) -> bool:
        return time.monotonic() - self.started >= self.config.run_budget_seconds

    def channel(self, name: str) -> Channel:
        if name not in self.channels:
            self.channels[name] = get_channel(name)
        return self.channels[name]

    def close(self) -> None:
        for channel in self.channels.values():
            try:
                channel.close()
            except Exception:
                logger.exception("closing a channel failed")

    def settled(self, matched: bool) -> None:
        if not matched:
            self.report.lost_claims += 1

    def retry_later(self, row: ClaimedSend, reason: str) -> None:
        """Hand a transiently failed row back for a later run, counting the attempt."""
        now = self.now()
        self.settled(claim.settle_retry(row, now, reason, not_before=now + self.config.retry_delay))
        self.report.retried += 1

    def run(self) -> None:
        self.report.expired += claim.expire_past_grace(self.now(), self.config)
        while not self.budget_spent():
            self.sync_clock()
            batch = claim.claim_due(self.now(), self.config)
            if not batch:
                return
            self.report.batches += 1
            self.report.claimed += len(batch)
            for row in batch:
                if self.budget_spent():
                    self.settled(claim.release_untried(row, self.now()))
                    self.report.released += 1
                    continue
                self.deliver_one(row)
            if len(batch) < self.config.batch_size:
                return

    def deliver_one(self, row: ClaimedSend) -> None:
        now = self.now()
        if row.send_started_at is not None:
            self.settled(claim.settle_failed(row, now, INTERRUPTED_REASON))
            self.report.failed += 1
            return
        try:
            outcome = resolve(row, now, self.config)
        except Exception as exc:
            # One row's bad data must not strand the rest of the batch.
            logger.exception("resolving a claimed row failed", extra={"send_id": row.id})
            self.retry_later(row, f"{type(exc).__name__} while resolving")
            self.report.errors.append(type(exc).__name__)
            return
        if isinstance(outcome, Skip):
            self.settled(claim.settle_skipped(row, now, outcome.reason))
            self.report.skipped += 1
            return
        if isinstance(outcome, Undeliverable):
            self.settled(claim.settle_failed(row, now, outcome.reason))
            self.report.failed += 1
            return
        paused = self.paused_until.get(outcome.channel)
        if paused is not None and paused > now:
            self.settled(claim.release_untried(row, now, not_before=paused))
            self.report.released += 1
            return
        if not claim.mark_sending(row, now, outcome.channel):
            # The claim is no longer ours: sending now could duplicate.
            self.report.lost_claims += 1
            return
        self.send(row, outcome)

    def send(self, row: ClaimedSend, delivery: Delivery) -> None:
        try:
            receipt = self.channel(delivery.channel).send(delivery.address, delivery.message)
        except RateLimited as exc:
            wait = timedelta(seconds=max(1.0, exc.retry_after or 60.0))
            now = self.now()
            self.paused_until[delivery.channel] = now + wait
            self.settled(claim.settle_retry(row, now, exc.describe(), not_before=now + wait))
            self.report.retried += 1
        except TransientSendError as exc:
            self.retry_later(row, exc.describe())
        except PermanentSendError as exc:
            self.settled(claim.settle_failed(row, self.now(), exc.describe()))
            self.report.failed += 1
        except UnconfirmedSendError as exc:
            reason = f"{exc.describe()} — it may have been delivered; not resent"
            self.settled(claim.settle_failed(row, self.now(), reason))
            self.report.failed += 1
        except SendError as exc:  # an unclassified channel error: retry, it is bounded by grace
            self.retry_later(row, exc.describe())
        except Exception as exc:
            # A bug or an unexpected library error: retry (bounded by grace), loudly.
            logger.exception("channel raised unexpectedly", extra={"send_id": row.id})
            self.retry_later(row, describe_unexpected(exc))
            self.report.errors.append(type(exc).__name__)
        else:
            message_id = getattr(receipt, "provider_message_id", None)
            if not isinstance(message_id, str) or not message_id:
                # Accepted, but we cannot say what: a channel bug. Sent, probably;
                # not sent again, and loud.
                reason = f"{UNUSABLE_RECEIPT} ({type(receipt).__name__})"
                self.settled(claim.settle_failed(row, self.now(), reason))
                self.report.failed += 1
                self.report.errors.append("unusable receipt")
                return
            self.settled(claim.settle_sent(row, self.now(), delivery.channel, message_id))
            self.report.sent += 1


def run_deliver(
    now: datetime | None = None,
    *,
    batch_size: int | None = None,
    budget_seconds: float | None = None,
) -> DeliverReport:
    """Deliver everything due now, in bounded batches, within the run's budget."""
    config = QueueConfig.from_settings()
    if batch_size is not None or budget_seconds is not None:
        config = QueueConfig(
            **{
                **config.__dict__,
                "batch_size": batch_size or config.batch_size,
                "run_budget_seconds": budget_seconds or config.run_budget_seconds,
            }
        )
        config.validate()
    started = time.monotonic()
    as_of = now or claim.database_now()
    report = DeliverReport(as_of=as_of)
    with recorded_run(SweepRun.Sweep.DELIVER, as_of) as run:
        delivery_run = DeliveryRun(config, now, report)
        try:
            delivery_run.run()
        finally:
            delivery_run.close()
            report.seconds = time.monotonic() - started
            run.counts = report.as_dict()
            run.summary = report.summary()[:255]
        if not report.ok:
            run.status = SweepRun.Status.FAILED
            run.error = "; ".join(report.errors[:20]) or "lost claims"
    return report
