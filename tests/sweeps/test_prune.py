"""Retention: ``prune_sends`` deletes settled history older than the cut-off, and nothing else.

Pending rows are work still to do (or evidence that delivery is stuck), and
recent settled rows are what support reads when a user asks "did you send
it?": pruning either would lose something a person needs.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta

from django.core.management import call_command

from scheduled_sends.models import Kind, ScheduledSend, SweepRun
from scheduled_sends.queue.transitions import database_now
from tenancy.scope import support_scope, tenant_scope

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
_ref_ids = itertools.count(1)


def queue_row(user, now: datetime, *, fired_ago: timedelta, outcome: str | None, **fields) -> int:
    """A queue row of ``user`` that fired ``fired_ago`` before ``now``, settled as ``outcome``."""
    fire_at = now - fired_ago
    with tenant_scope(user.pk):
        return ScheduledSend.objects.create(
            user=user,
            kind=Kind.FOLLOW_UP,
            ref_id=next(_ref_ids),
            intended_at=fire_at,
            fire_at=fire_at,
            subject_starts_at=fire_at + timedelta(minutes=10),
            outcome=outcome,
            sent_at=fire_at if outcome in {"sent", "skipped"} else None,
            **fields,
        ).pk


def remaining_ids() -> set[int]:
    with support_scope():
        return set(ScheduledSend.objects.values_list("pk", flat=True))


def test_prune_deletes_exactly_the_old_settled_rows_of_every_tenant(make_user, capsys):
    now = database_now()
    doomed, kept = set(), set()
    for user in (make_user(), make_user()):
        for outcome in ("sent", "skipped", "failed", "expired"):
            doomed.add(queue_row(user, now, fired_ago=30 * DAY + HOUR, outcome=outcome))
            kept.add(queue_row(user, now, fired_ago=30 * DAY - HOUR, outcome=outcome))
        doomed.add(queue_row(user, now, fired_ago=90 * DAY, outcome="sent"))
        # Never settled, however old: not history, so not retention's to delete.
        kept.add(queue_row(user, now, fired_ago=90 * DAY, outcome=None))
        kept.add(queue_row(user, now, fired_ago=90 * DAY, outcome=None, claimed_at=now - DAY))

    call_command("prune_sends", "--older-than", "30", "--batch-size", "4")

    left = remaining_ids()
    assert not kept - left, f"pruned rows that are pending or recent: {sorted(kept - left)}"
    assert not doomed & left, f"kept old settled rows: {sorted(doomed & left)}"
    out = capsys.readouterr().out
    assert "  … 4 deleted\n  … 8 deleted\n  … 10 deleted\n" in out, out
    summary = re.search(r"prune_sends: deleted (\d+) settled rows fired before (.+)Z", out)
    assert summary, out
    assert int(summary[1]) == len(doomed)
    cutoff = datetime.strptime(summary[2], "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
    assert abs(cutoff - (now - 30 * DAY)) < timedelta(minutes=2)

    call_command("prune_sends", "--older-than", "30")
    assert "prune_sends: deleted 0 settled rows" in capsys.readouterr().out
    assert remaining_ids() == kept


def test_prune_deletes_the_run_log_of_before_the_cut_off_and_keeps_the_rest(db, capsys):
    now = database_now()
    ages = {"old": 30 * DAY + HOUR, "older": 200 * DAY, "recent": 30 * DAY - HOUR, "new": HOUR}
    runs = {}
    for name, age in ages.items():
        run = SweepRun.objects.create(
            sweep=SweepRun.Sweep.DELIVER, as_of=now - age, status=SweepRun.Status.OK
        )
        SweepRun.objects.filter(pk=run.pk).update(started_at=now - age)
        runs[name] = run.pk

    call_command("prune_sends", "--older-than", "30", "--batch-size", "1")

    assert "; deleted 2 run-log entries" in capsys.readouterr().out
    left = set(SweepRun.objects.values_list("pk", flat=True))
    assert left == {runs["recent"], runs["new"]}
