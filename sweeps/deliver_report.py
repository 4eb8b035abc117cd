"""What one deliver run did: its counts, lateness and rates, as the summary line
people read and as the run log's counts that health and ``/metrics`` read back."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from scheduled_sends.failures import TRANSIENT, FailureKind
from scheduled_sends.lateness import LatenessSummary
from scheduled_sends.queue.transitions import Transition
from scheduled_sends.runlog import DeliverCounts
from sweeps.verdicts import Verdict


@dataclass(kw_only=True)
class DeliverReport(DeliverCounts):
    as_of: datetime
    claimed: int = 0
    released: int = 0
    lost_claims: int = 0
    rate_limited_by_channel: Counter[str] = field(default_factory=Counter)
    sent_by_channel: Counter[str] = field(default_factory=Counter)
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

    def count(self, transition: Transition) -> None:
        name = {
            Transition.SENT: "sent",
            Transition.SKIPPED: "skipped",
            Transition.FAILED: "failed",
            Transition.RETRY: "retried",
        }[transition]
        setattr(self, name, getattr(self, name) + 1)

    def count_attempt(self, channel: str, verdict: Verdict) -> None:
        """What a send on ``channel`` came to, for health's failed-sends checks."""
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

    def lateness(self) -> LatenessSummary:
        return LatenessSummary.of(self.latenesses)

    def summary(self) -> str:
        text = (
            f"deliver: claimed {self.claimed}, sent {self.sent}, skipped {self.skipped}, "
            f"retry {self.retried}, failed {self.failed}, expired {self.expired} "
            f"in {self.seconds:.1f}s"
        )
        if self.sent:
            late = self.lateness()
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
        return text

    def as_dict(self) -> dict[str, object]:
        late = self.lateness()
        return {
            **super().as_dict(),
            "sends_per_second": round(self.sends_per_second, 2),
            "lateness_histogram": late.histogram,
            **late.as_counts(),
        }
