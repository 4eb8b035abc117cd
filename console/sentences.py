"""What the support console says besides health's own sentences: where their links
lead for the reader, the backlog when no report could be made, and the pacing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.urls import reverse

from console.health import HealthCheck
from core.display import duration, plural
from pacing import pacer


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

    def resolve(self, link: str) -> str:
        """A check's ``queue?…``/``runs?…`` link as this reader's URL; anchors as they are."""
        if not link or link.startswith("#"):
            return link
        changelist, query = link.split("?", 1)
        base = getattr(self, changelist)
        return f"{base}?{query}" if base else ""


def health_lines(checks: list[HealthCheck], links: Links) -> list[HealthCheck]:
    """Health's checks with their links resolved for the reader, failing ones first."""
    lines = [replace(check, link=links.resolve(check.link)) for check in checks]
    return sorted(lines, key=lambda line: (line.ok, not line.warning))


def backlog_line(figures: dict[str, Any]) -> HealthCheck:
    """What is due and unsent, shown when no health report could be made."""
    due = plural(int(figures.get("due_backlog") or 0), "nudge")
    return HealthCheck("due_backlog", True, f"{due} due and not yet sent.")


def pacing_lines(states: list[pacer.BudgetState]) -> list[HealthCheck]:
    """Each shared rate in force: at its setting, lowered by a 429, or paused."""
    lines = []
    for state in states:
        calendar = state.budget.startswith(("google", "graph"))
        scale, unit = (60, "/min") if calendar else (1, "/s")
        rate, ceiling = state.rate * scale, state.ceiling * scale
        if state.lowered:
            text = (
                f"{state.budget} paced at {rate:,.1f}{unit} of its configured "
                f"{ceiling:,.1f}{unit}: lowered by a 429, climbing back."
            )
        else:
            text = f"{state.budget} paced at its configured {ceiling:,.1f}{unit}."
        if state.paused_for >= 1:
            text += f" Paused for {duration(state.paused_for)} more (Retry-After)."
        lines.append(HealthCheck(f"pacing_{state.budget}", True, text))
    return lines
