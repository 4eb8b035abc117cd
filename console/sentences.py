"""What the support console says: each health check as a sentence, with its figure
and a link to the rows behind it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from console.health import LATE_BEYOND, Check
from core.config import NudgeConfig
from core.display import duration, plural, when
from pacing import pacer


@dataclass(frozen=True)
class HealthLine:
    """One check, as a sentence; ``link`` leads to the rows behind it."""

    name: str
    ok: bool
    sentence: SafeString
    link: str = ""
    link_text: str = ""
    warning: bool = False  # passing, with something to look at: never "all clear"


@dataclass(frozen=True)
class Links:
    """Where a line may send the reader; empty where the reader may not look."""

    queue: str = ""
    runs: str = ""

    @classmethod
    def for_user(cls, user) -> Links:
        def changelist(model: str) -> str:
            perms = (f"scheduled_sends.{action}_{model}" for action in ("view", "change"))
            allowed = any(user.has_perm(perm) for perm in perms)
            return reverse(f"admin:scheduled_sends_{model}_changelist") if allowed else ""

        return cls(queue=changelist("scheduledsend"), runs=changelist("sweeprun"))

    def to_queue(self, query: str) -> str:
        return f"{self.queue}?{query}" if self.queue else ""

    def to_runs(self, query: str) -> str:
        return f"{self.runs}?{query}" if self.runs else ""


def _detail_line(template: str) -> Callable:
    """A check whose own detail, put into ``template``, is its sentence."""
    return lambda check: HealthLine(check.name, check.ok, format_html(template, check.detail))


def health_lines(
    report_checks: list, figures: dict[str, Any], links: Links, config: NudgeConfig
) -> list[HealthLine]:
    """Every check as a sentence, failing ones first."""
    overdue = duration(config.overdue_after.total_seconds())
    lease = duration(config.lease.total_seconds())
    doing = {"deliver": "Deliver is running", "materialize": "Upcoming nudges are being queued"}
    not_doing = {
        "deliver": "Nudges are not being sent",
        "materialize": "Upcoming nudges are not being queued",
    }

    def sweep_runs(check) -> HealthLine:
        # Says only that the sweep runs: a deliver run that sent nothing is the sends' checks'.
        sweep = check.name.removesuffix("_recent")
        last = figures.get(f"last_{sweep}_at")
        runs = links.to_runs(f"sweep__exact={sweep}")
        if check.ok:
            text = format_html(
                "{}: the last {} run succeeded at {}.", doing[sweep], sweep, when(last)
            )
            return HealthLine(check.name, True, text, runs, f"{sweep} runs")
        limit: timedelta = getattr(config, f"{sweep}_stale_after")
        if last is None:
            text = format_html("{}: no {} run has succeeded yet.", not_doing[sweep], sweep)
        else:
            text = format_html(
                "{}: no {} run has succeeded since {} (the limit is {}).",
                not_doing[sweep],
                sweep,
                when(last),
                duration(limit.total_seconds()),
            )
        return HealthLine(check.name, False, text, runs, f"view {sweep} runs")

    def failed_run(check) -> HealthLine:
        sweep = check.name.removesuffix("_last_run")
        query = f"sweep__exact={sweep}&status__exact=failed"
        if check.ok:
            text = format_html("The last {} run did not fail.", sweep)
        else:
            text = format_html("The last {} run failed: {}", sweep, check.detail.split(": ", 1)[-1])
        return HealthLine(check.name, check.ok, text, links.to_runs(query), "view failed runs")

    def rls(check) -> HealthLine:
        if check.ok:
            text = format_html(
                "{}", "Each tenant's data is fenced: row-level security is enforced."
            )
        else:
            text = format_html("Row-level security is NOT enforced: {}", check.detail)
        return HealthLine(check.name, check.ok, text)

    def overdue_unclaimed(check) -> HealthLine:
        n = int(figures.get("overdue_unclaimed") or 0)
        link = links.to_queue("due=overdue")
        if not n:
            text = format_html("Nothing due over {} ago is waiting unclaimed.", overdue)
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} due over {} ago {} unclaimed.",
            plural(n, "nudge"),
            overdue,
            "is" if n == 1 else "are",
        )
        return HealthLine(check.name, False, text, link, "view them")

    def stuck(check) -> HealthLine:
        n = int(figures.get("stuck_claims") or 0)
        if not n:
            text = format_html("No claim is older than the lease ({}).", lease)
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} older than the lease ({}): the deliver run holding {} died.",
            plural(n, "claim is", "claims are"),
            lease,
            "it" if n == 1 else "them",
        )
        return HealthLine(check.name, False, text, links.to_queue("state=stuck"), "view them")

    def keeping_up(check) -> HealthLine:
        n = int(figures.get("overdue_seen_by_materialize") or 0)
        at = when(figures.get("last_materialize_at"))
        if not n:
            text = format_html("Delivery was keeping up when the queue was last checked ({}).", at)
            return HealthLine(check.name, True, text)
        if check.ok:  # true when materialize looked, cleared by the deliver runs since
            text = format_html(
                "Delivery has caught up: when the queue was last checked ({}), {} whose time "
                "had passed {} unsent; deliver has sent or settled {} since.",
                at,
                plural(n, "nudge"),
                "was" if n == 1 else "were",
                "it" if n == 1 else "them",
            )
            return HealthLine(check.name, True, text)
        text = format_html(
            "When the queue was last checked ({}), {} whose time had passed "
            "{} still unsent and unclaimed.",
            at,
            plural(n, "nudge"),
            "was" if n == 1 else "were",
        )
        return HealthLine(check.name, False, text, links.to_queue("due=overdue"), "view them")

    def on_time(check) -> HealthLine:
        p95 = figures.get("lateness_p95_bucket_seconds")
        sent = int(figures.get("sent_last_15_min") or 0)
        limit = round(config.max_p95_lateness.total_seconds())
        if p95 is None:
            text = format_html("{}", "No nudge was sent in the last 15 minutes, so none was late.")
        elif p95 == float("inf"):
            text = format_html(
                "Nudges are going out late: of {} in the last 15 minutes, the slowest 5% "
                "arrived more than {} after their time (limit {} s).",
                plural(sent, "nudge") + " sent",
                duration(LATE_BEYOND),
                limit,
            )
        else:
            text = format_html(
                "{}: 95% of the {} in the last 15 minutes arrived within {} s of their time "
                "(limit {} s).",
                "Nudges are on time" if check.ok else "Nudges are going out late",
                plural(sent, "nudge") + " sent",
                f"{p95:g}",
                limit,
            )
        return HealthLine(check.name, check.ok, text, "#lateness", "see the lateness chart")

    def nothing_expired(check) -> HealthLine:
        n = int(figures.get("expired_last_15_min") or 0)
        if not n:
            text = format_html("{}", "No nudge expired unsent in the last 15 minutes.")
            return HealthLine(check.name, True, text)
        text = format_html(
            "{} expired unsent in the last 15 minutes: {} never reached the user.",
            plural(n, "nudge"),
            "it" if n == 1 else "they",
        )
        return HealthLine(check.name, False, text, links.to_queue("state=expired"), "view expired")

    def channels_configured(check) -> HealthLine:
        if check.ok:
            text = format_html("{}", "No send failed on our own channel configuration.")
            return HealthLine(check.name, True, text)
        text = format_html(
            "Sends are failing on our channel configuration — fix the setting named here: {}.",
            check.detail,
        )
        return HealthLine(
            check.name,
            False,
            text,
            links.to_queue("failure_kind__exact=configuration"),
            "view them",
        )

    def sends_succeeding(check) -> HealthLine:
        if check.ok and not check.warning:
            text = format_html("{}", "No send failed at a provider in the last 15 minutes.")
            return HealthLine(check.name, True, text)
        verdict = "Sends are failing" if not check.ok else "Some sends failed"
        text = format_html("{}: {}.", verdict, check.detail)
        return HealthLine(
            check.name,
            check.ok,
            text,
            links.to_queue("state=failed"),
            "view failed sends",
            warning=check.warning,
        )

    # No fallback: a check without its sentence fails here, not quietly on the page.
    sentences: dict[Check, Callable] = {
        Check.ROW_LEVEL_SECURITY: rls,
        Check.DELIVER_RECENT: sweep_runs,
        Check.MATERIALIZE_RECENT: sweep_runs,
        Check.DELIVER_LAST_RUN: failed_run,
        Check.MATERIALIZE_LAST_RUN: failed_run,
        Check.OVERDUE_UNCLAIMED: overdue_unclaimed,
        Check.STUCK_CLAIMS: stuck,
        Check.DELIVERY_KEEPING_UP: keeping_up,
        Check.QUEUE_READABLE: _detail_line("The sweeper role cannot read the queue: {}"),
        Check.NUDGES_ON_TIME: on_time,
        Check.NOTHING_EXPIRED: nothing_expired,
        Check.CALENDAR_PUSH: _detail_line("Calendar push: {}."),
        Check.QUEUE_PARTITIONS: _detail_line("Queue partitions: {}."),
        Check.CHANNELS_CONFIGURED: channels_configured,
        Check.SENDS_SUCCEEDING: sends_succeeding,
    }
    missing = set(Check) - set(sentences)
    if missing:
        raise LookupError(f"health checks without a console sentence: {sorted(missing)}")
    lines = [sentences[Check(check.name)](check) for check in report_checks]
    return sorted(lines, key=lambda line: (line.ok, not line.warning))


def figure_lines(figures: dict[str, Any], links: Links) -> list[HealthLine]:
    """The figures alone, when no health report could be made."""
    stuck = int(figures.get("stuck_claims") or 0)
    return [
        *(
            HealthLine(
                f"last_{sweep}",
                True,
                format_html(
                    "Last successful {} run: {}.", sweep, when(figures.get(f"last_{sweep}_at"))
                ),
            )
            for sweep in ("deliver", "materialize")
        ),
        HealthLine(
            "due_backlog",
            True,
            format_html(
                "{} due and not yet sent.", plural(int(figures.get("due_backlog") or 0), "nudge")
            ),
        ),
        HealthLine(
            "stuck_claims",
            not stuck,
            format_html("{} older than the lease.", plural(stuck, "claim is", "claims are")),
            links.to_queue("state=stuck") if stuck else "",
            "view them",
        ),
    ]


def pacing_lines(states: list[pacer.BudgetState]) -> list[HealthLine]:
    """Each shared rate in force: at its setting, lowered by a 429, or paused."""
    lines = []
    for state in states:
        calendar = state.budget.startswith(("google", "graph"))
        scale, unit = (60, "/min") if calendar else (1, "/s")
        rate, ceiling = state.rate * scale, state.ceiling * scale
        if state.lowered:
            text = format_html(
                "{} paced at {}{} of its configured {}{}: lowered by a 429, climbing back.",
                state.budget,
                f"{rate:,.1f}",
                unit,
                f"{ceiling:,.1f}",
                unit,
            )
        else:
            text = format_html(
                "{} paced at its configured {}{}.", state.budget, f"{ceiling:,.1f}", unit
            )
        if state.paused_for >= 1:
            paused = duration(state.paused_for)
            text = format_html("{} Paused for {} more (Retry-After).", text, paused)
        lines.append(HealthLine(f"pacing_{state.budget}", True, text))
    return lines
