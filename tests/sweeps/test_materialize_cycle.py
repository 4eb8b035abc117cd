"""Issue 25, item 1: materialize shares a cycle across processes and machines.

The users of a cycle are split into slices that any number of ``materialize``
processes claim; together they visit every user once; a participant killed
mid-slice leaves its slice to be taken over in the same cycle; a cycle
already complete is not run again.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection, transaction

from core.config import NudgeConfig
from scheduled_sends.models import MaterializeCycle, MaterializeSlice, SweepRun
from scheduled_sends.runlog import MaterializeCounts
from sweeps import cycle
from sweeps import materialize as materialize_module
from sweeps.materialize import UserFlow, run_materialize
from tests.conftest import utc
from tests.support.processes import manage, subprocess_env
from tests.sweeps.factories import FIVE_A_MINUTE, add_follow_up, rows

NOW = utc(2026, 12, 2, 14, 3)
SLOT = utc(2026, 12, 2, 14, 0)


def _users_with_follow_ups(make_user, count: int) -> list:
    users = [make_user() for _ in range(count)]
    for user in users:
        add_follow_up(user, NOW + timedelta(hours=1))
    return users


def _slices() -> list[MaterializeSlice]:
    return list(MaterializeSlice.objects.filter(cycle_id=SLOT).order_by("position"))


def _every_user_visited_once(users) -> None:
    """Each slice done once, the slices' users add up to everyone, one row each."""
    slices = _slices()
    assert slices and all(s.done_at is not None for s in slices)
    assert sum(s.users for s in slices) == len(users)
    assert all(len(rows(user)) == 1 for user in users)


@pytest.mark.django_db(transaction=True)
def test_the_first_run_of_a_slot_splits_its_users_into_slices_and_others_join_it(
    make_user, settings
):
    """Item 1: a cycle is the run's 15-minute slot, split into ranges of user ids."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 2
    users = [make_user() for _ in range(5)]
    config = NudgeConfig.from_settings()
    first = cycle.join_cycle(NOW, config)
    later = cycle.join_cycle(NOW + timedelta(minutes=9), config)
    assert first.starts_at == later.starts_at == SLOT
    assert later.as_of == NOW  # every participant plans from the same instant
    ranges = [(s.after_id, s.up_to) for s in _slices()]
    assert ranges == [(0, users[1].pk), (users[1].pk, users[3].pk), (users[3].pk, None)]
    assert cycle.cycle_start(utc(2026, 12, 2, 14, 15)) == utc(2026, 12, 2, 14, 15)


@pytest.mark.django_db(transaction=True)
def test_a_slice_whose_lease_lapsed_is_taken_over_and_done_once(make_user, settings):
    """Item 1: a participant that dies mid-slice leaves it to be taken over in the same cycle."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 10
    make_user()
    config = NudgeConfig.from_settings()
    cycle.join_cycle(NOW, config)
    held = cycle.claim_slice(SLOT, "gone:1", config)
    assert held is not None and not held.taken_over
    assert cycle.claim_slice(SLOT, "alive:2", config) is None  # held, lease running
    MaterializeSlice.objects.filter(pk=held.id).update(
        claimed_at=SLOT - config.materialize_slice_lease
    )
    taken = cycle.claim_slice(SLOT, "alive:2", config)
    assert taken is not None and taken.id == held.id and taken.taken_over
    assert not cycle.renew_lease(held.id, "gone:1")  # the old holder learns it lost it
    assert cycle.finish_slice(taken.id, "alive:2", users=1)
    assert not cycle.finish_slice(taken.id, "alive:2", users=1)  # done once
    assert not cycle.finish_slice(held.id, "gone:1", users=1)


@pytest.mark.django_db(transaction=True)
def test_a_complete_cycle_run_again_does_nothing_and_says_so(make_user, settings):
    """Item 1: a second run of the same cycle after it is complete does nothing but says so."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 2
    users = _users_with_follow_ups(make_user, 5)
    first = run_materialize(NOW, sync_calendars=False)
    assert (first.users, first.queued, first.cycle_slices_done, first.cycle_slices) == (5, 5, 3, 3)
    _every_user_visited_once(users)
    again = run_materialize(NOW + timedelta(minutes=5), sync_calendars=False)
    assert again.cycle_was_complete and again.queued == 0 and again.users == 0
    assert again.summary() == (
        "materialize: cycle 14:00Z is already complete (3 slices, 1 participant); "
        "this one did nothing"
    )
    (run,) = SweepRun.objects.filter(sweep="materialize")
    counts = MaterializeCounts.from_counts(run.counts)
    assert (counts.cycle, counts.participants, counts.cycle_slices_done) == (
        SLOT.isoformat(),
        1,
        3,
    )


@pytest.mark.django_db(transaction=True)
def test_runs_arriving_one_after_another_each_take_the_slices_left(make_user, settings):
    """Item 1: a participant that arrives while slices are left takes them; each user once."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 2
    users = _users_with_follow_ups(make_user, 12)
    report = run_materialize(NOW, sync_calendars=False)
    assert (report.users, report.queued, report.failed_users) == (12, 12, 0)
    assert report.slices_taken == report.cycle_slices == 6
    _every_user_visited_once(users)


@pytest.mark.django_db(transaction=True)
def test_a_cycle_cut_short_by_the_budget_leaves_slices_the_next_cycle_starts_with(
    make_user, settings
):
    """Item 1: the run budget still holds; the next cycle starts with the slices left."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 2
    users = _users_with_follow_ups(make_user, 5)
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 1e-9  # spent before the first slice
    cut = run_materialize(NOW, sync_calendars=False)
    assert cut.cut_short and cut.users == 0 and "CUT SHORT" in cut.summary()
    # Pretend the cut cycle had done its first slice: the next starts with the second.
    MaterializeSlice.objects.filter(cycle_id=SLOT, position=0).update(done_at=NOW)
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 780
    nxt = run_materialize(NOW + timedelta(minutes=15), sync_calendars=False)
    assert nxt.cycle == SLOT + timedelta(minutes=15) and not nxt.cut_short
    first = MaterializeSlice.objects.get(cycle_id=nxt.cycle, position=0)
    assert first.after_id == users[1].pk


class _BudgetClock:
    """The monotonic clock materialize and the cycle budget by, with the run's budget
    spent at a chosen moment: the budget ends mid-slice however fast the machine is."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead

    def install(self, monkeypatch) -> None:
        clock = SimpleNamespace(monotonic=self.monotonic, sleep=time.sleep)
        monkeypatch.setattr(materialize_module, "time", clock)
        monkeypatch.setattr(cycle, "time", clock)


def _budget_spent_after(users: int, budget: float, monkeypatch) -> None:
    """This process's runs spend their whole ``budget`` once they have taken ``users`` in."""
    clock = _BudgetClock()
    clock.install(monkeypatch)
    take_in = UserFlow.add

    def add(flow: UserFlow, user_id: int, tag: object = None) -> None:
        take_in(flow, user_id, tag)
        if flow.report.users == users:
            clock.ahead = budget

    monkeypatch.setattr(UserFlow, "add", add)


@pytest.mark.django_db(transaction=True)
def test_a_participant_out_of_budget_mid_slice_hands_it_back_for_another_to_finish(
    make_user, settings, monkeypatch
):
    """Item 1: the run budget with several participants. One whose budget ends
    part-way through a slice hands the slice back at once (not left leased for
    minutes), and another run of the same cycle finishes it: every user queued once."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 5
    settings.NUDGE_MATERIALIZE_BUDGET_SECONDS = 600
    users = _users_with_follow_ups(make_user, 15)  # three slices of five
    _budget_spent_after(7, 600, monkeypatch)  # the whole first slice, two of the second

    cut = run_materialize(NOW, sync_calendars=False)
    assert cut.cut_short and "CUT SHORT" in cut.summary()
    assert (cut.users, cut.queued) == (7, 7)  # the users it took in are queued all the same
    assert (cut.slices_taken, cut.slices_taken_over) == (2, 0)
    assert (cut.cycle_slices_done, cut.cycle_slices) == (1, 3)
    first, second, third = _slices()
    assert first.done_at is not None and first.users == 5
    # Handed back, not held: free for the next participant now, not when a lease lapses.
    assert (second.done_at, second.claimed_by, second.claimed_at) == (None, "", None)
    assert (third.done_at, third.claimed_by) == (None, "")
    assert cycle.cycle_state(SLOT, NudgeConfig.from_settings()).free == 2
    monkeypatch.undo()

    # Another process, same cycle, with the usual three-minute slice lease and a
    # budget well short of it: it finishes only if the slice was really handed back.
    env = subprocess_env(NUDGE_MATERIALIZE_SLICE_USERS="5", NUDGE_MATERIALIZE_BUDGET_SECONDS="30")
    later = (NOW + timedelta(minutes=2)).isoformat()
    other = manage("materialize", "--now", later, "--no-sync", env=env)
    out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert "took 2 slices (0 taken over), 3/3 done, 2 participants" in out, out
    assert "CUT SHORT" not in out
    _every_user_visited_once(users)
    assert sum(s.takeovers for s in _slices()) == 0  # handed over, nobody's lease lapsed

    cut_run, finishing_run = (
        MaterializeCounts.from_counts(run.counts)
        for run in SweepRun.objects.filter(sweep="materialize").order_by("started_at", "pk")
    )
    assert (cut_run.cut_short, cut_run.slices_taken, cut_run.cycle_slices_done) == (True, 2, 1)
    assert (finishing_run.cut_short, finishing_run.slices_taken) == (False, 2)
    assert (finishing_run.slices_taken_over, finishing_run.cycle_slices_done) == (0, 3)
    assert {cut_run.cycle, finishing_run.cycle} == {SLOT.isoformat()}
    queued = SweepRun.objects.filter(sweep="materialize").values_list("counts__queued", flat=True)
    assert sorted(queued) == [7, 8]  # the second queued only the users the first had not


def _wait_for(condition, timeout: float = 60.0, every: float = 0.02) -> None:
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, "timed out"
        time.sleep(every)


def _waiting_on_locks() -> int:
    """Sessions waiting for this transaction (pg_locks shows every session's locks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid' "
            "AND transactionid = pg_current_xact_id()::xid"
        )
        return cursor.fetchone()[0]


def _start_together(args: tuple[str, ...], env: dict[str, str]) -> list:
    """Two ``manage.py`` processes, held at the cycle's key until both arrived."""
    with transaction.atomic():
        MaterializeCycle.objects.create(starts_at=SLOT, as_of=NOW, slices=0)
        both = [manage(*args, env=env), manage(*args, env=env)]
        _wait_for(lambda: _waiting_on_locks() == 2)
        MaterializeCycle.objects.filter(pk=SLOT).delete()  # they create it themselves
    return both


@pytest.mark.django_db(transaction=True)
def test_two_materialize_processes_share_one_cycle_and_visit_every_user_once(make_user, settings):
    """Item 1: the same cron line on two machines: both take slices, every user once."""
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 3
    users = _users_with_follow_ups(make_user, 90)
    env = subprocess_env(NUDGE_MATERIALIZE_SLICE_USERS="3")
    args = ("materialize", "--now", NOW.isoformat(), "--no-sync")
    both = _start_together(args, env)
    outputs = [p.communicate(timeout=120) for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    _every_user_visited_once(users)
    runs = list(SweepRun.objects.filter(sweep="materialize"))
    counts = [MaterializeCounts.from_counts(run.counts) for run in runs]
    assert len(runs) == 2 and all(c.slices_taken > 0 for c in counts), outputs
    assert sum(c.slices_taken for c in counts) == 30
    assert {c.cycle for c in counts} == {SLOT.isoformat()}
    assert max(c.participants for c in counts) == 2


@pytest.mark.django_db(transaction=True)
def test_a_participant_killed_mid_slice_leaves_it_to_be_taken_over_in_the_same_cycle(
    make_user, settings
):
    """Item 1: SIGKILL mid-slice; after the lease another participant finishes the cycle."""
    # Slices big enough that the victim is still inside one when the poll below sees it,
    # even with the test's own process starved of the CPU for a moment.
    settings.NUDGE_MATERIALIZE_SLICE_USERS = 100
    users = _users_with_follow_ups(make_user, 300)
    env = subprocess_env(
        NUDGE_MATERIALIZE_SLICE_USERS="100", NUDGE_MATERIALIZE_SLICE_LEASE_SECONDS="2"
    )
    args = ("materialize", "--now", NOW.isoformat(), "--no-sync")
    victim = manage(*args, env=env)
    # On a loaded machine the child may take long to start: wait longer, and if it
    # ended instead, say how.
    _wait_for(
        lambda: (
            victim.poll() is not None
            or MaterializeSlice.objects.filter(
                cycle_id=SLOT, claimed_at__isnull=False, done_at__isnull=True
            ).exists()
        ),
        timeout=180.0,
    )
    assert victim.poll() is None, f"the victim ended before it was killed: {victim.communicate()}"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    held = MaterializeSlice.objects.filter(cycle_id=SLOT, done_at__isnull=True).exclude(
        claimed_by=""
    )
    assert held.exists(), "the victim finished before it was killed"
    survivor = manage(*args, env=env)
    out, err = survivor.communicate(timeout=120)
    assert survivor.returncode == 0, err
    _every_user_visited_once(users)
    assert sum(s.takeovers for s in _slices()) >= 1
    assert "taken over" in out and "3/3 done" in out


@pytest.mark.django_db(transaction=True)
def test_two_participants_filling_the_same_minute_smooth_it_as_one_run_would(make_user, settings):
    """Item 1: smoothing keeps working when several processes fill the same minute."""
    settings.NUDGE_TELEGRAM_RATE = FIVE_A_MINUTE
    users = [make_user(channel="telegram", telegram_chat_id=str(9000 + i)) for i in range(20)]
    intended = utc(2026, 12, 2, 15, 0) - timedelta(minutes=10)  # everyone's, by default lead
    for user in users:
        add_follow_up(user, intended + timedelta(minutes=10))
    env = subprocess_env(NUDGE_MATERIALIZE_SLICE_USERS="2", NUDGE_TELEGRAM_RATE=repr(FIVE_A_MINUTE))
    both = _start_together(("materialize", "--now", NOW.isoformat(), "--no-sync"), env)
    outputs = [p.communicate(timeout=120) for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    runs = list(SweepRun.objects.filter(sweep="materialize"))
    assert len(runs) == 2 and all(run.counts["slices_taken"] > 0 for run in runs), outputs
    queue = [row for user in users for row in rows(user)]
    per_minute = Counter(row.fire_at for row in queue)
    # What one run moves (test_burst): 15 nudges, 5 a minute, nothing moved twice.
    assert per_minute == {intended - k * timedelta(minutes=1): 5 for k in range(4)}
    assert sum(run.counts["moved_earlier"] for run in runs) == 15
