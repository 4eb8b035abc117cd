"""Telling an outage from a quiet minute: a blind claim, a stopped deliver cron and a
quiet minute all print "claimed 0", so health reads the queue from independent angles
(run log, live queue under the bypass, what materialize saw in each user's own scope,
recent lateness and failed sends, partitions, calendar push, row-level security)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import DatabaseError

from calendars.push.worklist import push_health
from core.config import NudgeConfig
from core.display import duration, plural
from scheduled_sends import failures
from scheduled_sends.failures import FailureKind
from scheduled_sends.lateness import BUCKETS, merged_p95
from scheduled_sends.models import SweepRun
from scheduled_sends.queue.partitions import coverage_problem, covered_until, partitions
from scheduled_sends.queue.states import DueCounts
from scheduled_sends.queue.transitions import database_now, queue_counts
from scheduled_sends.runlog import DeliverCounts, MaterializeCounts
from tenancy.checks import rls_problems


@dataclass(frozen=True)
class HealthCheck:
    """One check's verdict and the sentence support reads of it, the same in
    ``nudge_health``, ``/healthz`` and the console. ``ok`` False needs a human now (red);
    ``warning`` is a passing check with something to look at (amber), never "all clear".
    ``link`` names the rows behind it (``queue?…``, ``runs?…`` or a ``#`` anchor of the
    console page); the console resolves it for the reader."""

    name: str
    ok: bool
    detail: str
    warning: bool = False
    link: str = ""
    link_text: str = "view them"


@dataclass
class HealthReport:
    as_of: datetime
    checks: list[HealthCheck] = field(default_factory=list)
    figures: dict[str, object] = field(default_factory=dict)
    # Why check_health could not be made: the console then shows ``runs_and_claims`` only.
    error: str = ""
    # The deliver runs of the last LATENESS_WINDOW, oldest first (``/metrics`` sums them).
    deliver_runs: list[DeliverCounts] = field(default_factory=list)

    @property
    def failing(self) -> list[HealthCheck]:
        return [check for check in self.checks if not check.ok]

    @property
    def ok(self) -> bool:
        return not self.failing

    @property
    def warnings(self) -> list[HealthCheck]:
        return [check for check in self.checks if check.ok and check.warning]

    @property
    def verdict(self) -> str:
        """One word that the console, ``nudge_health`` and ``/metrics`` all say."""
        if self.error:
            return "unknown"
        if not self.ok:
            return "unhealthy"
        return "warning" if self.warnings else "healthy"

    def add(self, name: str, ok: bool, detail: str, *, warning: bool = False, **link) -> None:
        self.checks.append(HealthCheck(name, ok, detail, warning and ok, **link))

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "as_of": self.as_of.isoformat(),
            "checks": [vars(check) for check in self.checks],
            "figures": {
                key: value.isoformat() if isinstance(value, datetime) else value
                for key, value in self.figures.items()
            },
        }


def _ago(span: timedelta) -> str:
    seconds = span.total_seconds()
    return f"{duration(seconds)} ago" if seconds >= 60 else "less than a minute ago"


# What each sweep running, and not running, means to support.
_SWEEP_WORDS = {
    "deliver": ("Deliver is running", "Nudges are not being sent"),
    "materialize": ("Upcoming nudges are being queued", "Upcoming nudges are not being queued"),
}


def _check_recent(report: HealthReport, sweep: str, stale_after: timedelta) -> SweepRun | None:
    """Did the last ``sweep`` run fail, and did one succeed within ``stale_after``? Says
    only that the sweep runs: a deliver run that sent nothing is the sends' checks'."""
    # as_of, not started_at: a replay with --now acts for its simulated instant.
    runs = SweepRun.objects.filter(sweep=sweep).order_by("-as_of", "-pk")
    last_ok = runs.filter(status=SweepRun.Status.OK).first()
    last_any = runs.first()
    report.figures[f"last_{sweep}_at"] = last_ok.as_of if last_ok else None
    if last_any is not None and last_any.status == SweepRun.Status.FAILED:
        said = f"The last {sweep} run failed: {last_any.error or last_any.summary}"
        link = f"runs?sweep__exact={sweep}&status__exact=failed"
        report.add(f"{sweep}_last_run", False, said[:500], link=link, link_text="view failed runs")
    doing, not_doing = _SWEEP_WORDS[sweep]
    age = report.as_of - last_ok.as_of if last_ok else None
    ok = age is not None and age <= stale_after
    if ok:
        said = f"{doing}: the last {sweep} run succeeded {_ago(age)}."
    elif age is None:
        said = f"{not_doing}: no {sweep} run has succeeded yet."
    else:
        said = (
            f"{not_doing}: no {sweep} run has succeeded for {duration(age.total_seconds())} "
            f"(the limit is {duration(stale_after.total_seconds())})."
        )
    link = f"runs?sweep__exact={sweep}"
    link_text = f"{sweep} runs" if ok else f"view {sweep} runs"
    report.add(f"{sweep}_recent", ok, said, link=link, link_text=link_text)
    return last_ok


LATENESS_WINDOW = timedelta(minutes=15)
LATE_BEYOND = int(BUCKETS[-2])
# A deliver run's counts of the rows it dealt with, one outcome each.
DEALT_WITH = ("sent", "skipped", "failed", "expired", "retried")


def _deliver_runs(**lookups: object) -> list[DeliverCounts]:
    runs = SweepRun.objects.filter(sweep=SweepRun.Sweep.DELIVER, **lookups).order_by("as_of", "pk")
    return [DeliverCounts.from_counts(counts) for counts in runs.values_list("counts", flat=True)]


def _check_on_time(report: HealthReport, config: NudgeConfig) -> None:
    """p95 lateness and expiries over the deliver runs of the last 15 minutes."""
    runs = report.deliver_runs
    p95 = merged_p95(counts.lateness_histogram for counts in runs)
    expired, sent = sum(c.expired for c in runs), sum(c.sent for c in runs)
    limit = config.max_p95_lateness.total_seconds()
    report.figures.update(
        sent_last_15_min=sent, expired_last_15_min=expired, lateness_p95_bucket_seconds=p95
    )
    on_time = p95 is None or p95 <= limit
    of_sent = f"{plural(sent, 'nudge')} sent in the last 15 minutes"
    if p95 is None:
        said = "No nudge was sent in the last 15 minutes, so none was late."
    elif p95 == float("inf"):
        said = (
            f"Nudges are going out late: of {of_sent}, the slowest 5% arrived more than "
            f"{duration(LATE_BEYOND)} after their time (limit {limit:g} s)."
        )
    else:
        verdict = "Nudges are on time" if on_time else "Nudges are going out late"
        said = (
            f"{verdict}: 95% of the {of_sent} arrived within {p95:g} s of their time "
            f"(limit {limit:g} s)."
        )
    report.add(
        "nudges_on_time", on_time, said, link="#lateness", link_text="see the lateness chart"
    )
    grace = duration(config.grace.total_seconds())
    if not expired:
        said = "No nudge expired unsent in the last 15 minutes."
    else:
        said = (
            f"{plural(expired, 'nudge')} expired unsent in the last 15 minutes (past the "
            f"{grace} grace): {'it' if expired == 1 else 'they'} never reached the user."
        )
    link = {"link": "queue?state=expired", "link_text": "view expired"} if expired else {}
    report.add("nothing_expired", not expired, said, **link)


# Provider errors turn the sends check red at this share of the window's attempts
# and at least FAILING_MIN_ERRORS of them: a healthy channel loses a few percent to
# people who blocked the bot, and the floor keeps one refusal in a quiet minute amber.
FAILING_SHARE = 0.25
FAILING_MIN_ERRORS = 5


def _check_sends(report: HealthReport) -> None:
    """Failed sends of the last 15 minutes, by channel and kind.

    A configuration failure is red, naming the setting, until a later send on
    its channel succeeds; other failures are amber, red past ``FAILING_SHARE``.
    """
    broken: dict[str, tuple[str, int]] = {}  # channel -> (what it said, failed since)
    errors: dict[str, int] = {}
    sent = 0
    for counts in report.deliver_runs:
        for channel, n in counts.sent_by_channel.items():
            sent += int(n)
            if int(n):
                broken.pop(channel, None)  # a send went through since: fixed
        for channel, kinds in counts.failures_by_channel.items():
            for kind, n in kinds.items():
                if kind == FailureKind.CONFIGURATION:
                    said, before = broken.get(channel, ("", 0))
                    said = counts.configuration_errors.get(channel) or said
                    broken[channel] = (said, before + int(n))
                else:
                    errors[kind] = errors.get(kind, 0) + int(n)
    report.figures.update(
        sends_failed_configuration_last_15_min=sum(n for _, n in broken.values()),
        send_errors_last_15_min=sum(errors.values()),
    )
    if broken:
        said = "; ".join(
            f"{channel}: {said} ({n} sends failed)" for channel, (said, n) in sorted(broken.items())
        )
        report.add(
            "channels_configured",
            False,
            f"Sends are failing on our channel configuration — fix the setting named here: {said}.",
            link="queue?failure_kind__exact=configuration",
        )
    else:
        said = "No send failed on our own channel configuration."
        report.add("channels_configured", True, said)
    failed = sum(errors.values())
    attempts = sent + failed
    if not failed:
        said = f"No send failed at a provider in the last 15 minutes ({attempts} sent)."
        report.add("sends_succeeding", True, said)
        return
    red = failed / attempts >= FAILING_SHARE and failed >= FAILING_MIN_ERRORS
    by_kind = ", ".join(f"{n} {failures.count_label(k)}" for k, n in sorted(errors.items()))
    said = (
        f"{'Sends are failing' if red else 'Some sends failed'}: {failed} of {attempts} send "
        f"attempts failed in the last 15 minutes ({by_kind})."
    )
    link = {"link": "queue?state=failed", "link_text": "view failed sends"}
    report.add("sends_succeeding", not red, said, warning=True, **link)


def _check_partitions(report: HealthReport, now: datetime, config: NudgeConfig) -> None:
    """A missing day partition makes every insert for that day fail (there is no
    DEFAULT partition, on purpose): said here days before, from the catalog alone."""
    queued_until = now + config.lookahead + config.max_lead
    existing = partitions()
    problem = coverage_problem(now, queued_until, existing)
    reach = covered_until(now, existing)
    report.figures["partitioned_until"] = reach
    report.add(
        "queue_partitions",
        problem is None,
        f"Queue partitions: {problem}."
        if problem
        else f"Queue partitions: partitioned through {reach:%Y-%m-%d %H:%M}Z, past everything "
        f"materialize queues (up to {queued_until:%Y-%m-%d %H:%M}Z).",
    )


def check_health(now: datetime | None = None) -> HealthReport:
    """The queue's state; ``.ok`` is False when something needs a human."""
    config = NudgeConfig.from_settings()
    now = now or database_now()
    report = HealthReport(as_of=now)

    problems = rls_problems()
    if problems:
        said = f"Row-level security is NOT enforced: {'; '.join(problems)}"
    else:
        said = "Each tenant's data is fenced: row-level security is enforced on every tenant "
        said += "table for a non-superuser role."
    report.add("row_level_security", not problems, said)

    try:
        counts = queue_counts(now, config)
    except DatabaseError as exc:
        counts = None
        said = f"The sweeper role cannot read the queue: {exc}"
        report.add("queue_readable", False, said)
    last_materialize = runs_and_claims(report, config, counts)

    report.deliver_runs = _deliver_runs(as_of__gt=now - LATENESS_WINDOW, as_of__lte=now)
    _check_sends(report)
    _check_on_time(report, config)
    _check_partitions(report, now, config)

    push_ok, push_detail, push_figures = push_health(now, bool(config.calendar_push_base_url))
    report.figures.update(push_figures)
    report.add("calendar_push", push_ok, f"Calendar push: {push_detail}.")

    # Independent of the bypass: what materialize saw inside each user's scope.
    if last_materialize is not None:
        _check_keeping_up(report, last_materialize, now)
    return report


def runs_and_claims(
    report: HealthReport, config: NudgeConfig, counts: DueCounts | None
) -> SweepRun | None:
    """The sweeps' last runs and, given the queue's counts, its overdue rows and stuck
    claims: the checks the console still makes when no full report can be made."""
    _check_recent(report, SweepRun.Sweep.DELIVER, config.deliver_stale_after)
    last_materialize = _check_recent(
        report, SweepRun.Sweep.MATERIALIZE, config.materialize_stale_after
    )
    if counts is not None:
        report.figures.update(vars(counts))
        _check_claims(report, counts, config)
    return last_materialize


def _check_claims(report: HealthReport, counts: DueCounts, config: NudgeConfig) -> None:
    """Rows overdue and unclaimed, and claims older than the lease, from the queue counts."""
    overdue = duration(config.overdue_after.total_seconds())
    n = counts.overdue_unclaimed
    if n:
        said = f"{plural(n, 'nudge')} due over {overdue} ago {'is' if n == 1 else 'are'} unclaimed"
    else:
        said = f"Nothing due over {overdue} ago is waiting unclaimed"
    if counts.waiting_to_retry:
        # Over every due row: an overdue one may be among them, so never "more".
        k = counts.waiting_to_retry
        said += f"; of all due nudges, {k:,} {'is' if k == 1 else 'are'} waiting to be retried"
    link = {"link": "queue?due=overdue"} if n else {}
    report.add("overdue_unclaimed", not n, f"{said}.", **link)
    lease = duration(config.lease.total_seconds())
    n = counts.stuck_claims
    if n:
        said = (
            f"{plural(n, 'claim is', 'claims are')} older than the lease ({lease}): the deliver "
            f"run holding {'it' if n == 1 else 'them'} died."
        )
        report.add("stuck_claims", False, said, link="queue?state=stuck")
    else:
        report.add("stuck_claims", True, f"No claim is older than the lease ({lease}).")


def _overdue_seen_by_cycle(materialize: SweepRun) -> int:
    """Overdue rows the last materialize saw, summed over its cycle's finished runs
    (each participant counts only the users of the slices it took)."""
    counts = MaterializeCounts.from_counts(materialize.counts)
    if not counts.cycle:  # a run of named users
        return counts.overdue_unclaimed
    participants = (
        SweepRun.objects.filter(
            sweep=SweepRun.Sweep.MATERIALIZE, as_of=materialize.as_of, counts__cycle=counts.cycle
        )
        .exclude(status=SweepRun.Status.RUNNING)
        .values_list("counts", flat=True)
    )
    return sum(MaterializeCounts.from_counts(c).overdue_unclaimed for c in participants)


def _check_keeping_up(report: HealthReport, materialize: SweepRun, now: datetime) -> None:
    """What the last materialize saw, cleared once deliver runs since have dealt with
    at least as many rows and nothing is overdue now. The hint names the ordinary
    causes first: only a deliver that deals with nothing while the bypassed count
    reads empty means the claim is blind."""
    seen = _overdue_seen_by_cycle(materialize)
    live_overdue = report.figures.get("overdue_unclaimed")
    checked = f"when the queue was last checked ({_ago(now - materialize.as_of)})"
    report.figures["overdue_seen_by_materialize"] = seen
    report.figures["overdue_seen_cleared"] = False
    if not seen:
        report.add("delivery_keeping_up", True, f"Delivery was keeping up {checked}.")
        return
    nudges = f"{plural(seen, 'nudge')} whose time had passed {'was' if seen == 1 else 'were'}"
    done = _deliver_runs(status=SweepRun.Status.OK, as_of__gt=materialize.as_of)
    dealt = sum(getattr(counts, name) for counts in done for name in DEALT_WITH)
    report.figures["dealt_with_since_materialize"] = dealt
    if done and dealt >= seen and live_overdue == 0:
        report.figures["overdue_seen_cleared"] = True
        said = (
            f"Delivery has caught up: {checked}, {nudges} unsent; deliver has since dealt "
            f"with {dealt} and none is overdue now."
        )
        report.add("delivery_keeping_up", True, said)
        return
    deliver_running = any(c.ok for c in report.checks if c.name == "deliver_recent")
    if not deliver_running:
        hint = "deliver is not running (see the deliver check)"
    elif live_overdue:
        hint = f"the queue counts see {live_overdue} overdue too: deliver is falling behind"
    elif dealt == 0 and live_overdue == 0:
        hint = (
            "deliver is running and the queue counts say 0 overdue, so the claim "
            "cannot see the queue (the sweeper role's row-level security bypass)"
        )
    else:
        hint = f"deliver has since dealt with {dealt}"
    said = f"{checked.capitalize()}, {nudges} still unsent and unclaimed; {hint}."
    report.add("delivery_keeping_up", False, said, link="queue?due=overdue")
