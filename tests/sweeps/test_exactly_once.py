"""Exactly once under concurrency — and the double send the claim replaced.

The concurrent workers are separate ``manage.py deliver`` processes on the
real Telegram channel against the fake server (tests/fakes), with retries.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.config import NudgeConfig
from messaging.channels.base import NudgeMessage
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue import statements
from scheduled_sends.queue.transitions import Transition, claim_due, claim_params
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tenancy.scope import rls_bypass, support_scope
from tests.channels.queue import queue_follow_up, rows_of
from tests.conftest import utc
from tests.fakes import telegram_server as telegram
from tests.fakes.telegram_server import BOT_TOKEN
from tests.support.processes import manage, subprocess_env
from tests.support.queue import settle_one
from tests.support.recording import RecordingChannel
from tests.sweeps.factories import add_follow_up

NOW = utc(2026, 12, 2, 9, 0)
DUE = NOW + timedelta(minutes=6)  # every seeded nudge fires within 5m..5m05s
MESSAGE = NudgeMessage("hello", "hello", "09:15", 10, 600)
TENANTS = 60
ROWS_PER_TENANT = 5
WORKERS = 3
MAX_ROUNDS = 6


def _seed_due_rows(make_user, tenants: int, per_tenant: int) -> int:
    for _ in range(tenants):
        user = make_user()
        for n in range(per_tenant):
            add_follow_up(user, NOW + timedelta(minutes=15, seconds=n))
    return run_materialize(NOW).queued


def _naive_delivery_run(barrier: threading.Barrier, channel: RecordingChannel) -> None:
    """The pre-claim design: select, send, then a guarded update — after the send."""
    try:
        with rls_bypass(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT id FROM scheduled_sends WHERE sent_at IS NULL AND fire_at <= %s", [DUE]
            )
            due = [row[0] for row in cursor.fetchall()]
        barrier.wait()  # the second tick overlaps the first
        for row_id in due:
            channel.send(f"row:{row_id}", MESSAGE)
            with rls_bypass(), connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE scheduled_sends SET sent_at = %s, outcome = 'sent' "
                    "WHERE id = %s AND sent_at IS NULL",
                    [DUE, row_id],
                )
    finally:
        connection.close()


def _claiming_delivery_run(barrier: threading.Barrier, channel: RecordingChannel) -> None:
    try:
        claimed = claim_due(DUE, NudgeConfig.from_settings())
        barrier.wait()
        for row in claimed:
            receipt = channel.send(f"row:{row.id}", MESSAGE)
            settle_one(
                row,
                Transition.SENT,
                DUE,
                channel="console",
                message_id=receipt.provider_message_id,
            )
    finally:
        connection.close()


def _two_overlapping(run, channel) -> Counter:
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=run, args=(barrier, channel)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Counter(record.address for record in channel.sent)


@pytest.mark.django_db(transaction=True)
def test_the_old_guarded_update_double_sends_and_the_claim_does_not(make_user, recording_channel):
    rows = _seed_due_rows(make_user, tenants=3, per_tenant=4)
    channel = recording_channel()
    naive = _two_overlapping(_naive_delivery_run, channel)
    assert len(naive) == rows
    assert set(naive.values()) == {2}, "the guard ran after the send: every nudge went twice"

    with support_scope():
        ScheduledSend.objects.update(sent_at=None, outcome=None)
    recording_channel.reset()
    claimed = _two_overlapping(_claiming_delivery_run, channel)
    assert len(claimed) == rows
    assert set(claimed.values()) == {1}


def _run_workers(at: datetime, env: dict[str, str]) -> list[tuple[int, int]]:
    """The workers side by side, each a ``manage.py deliver``: (claimed, sent) of each."""
    workers = [
        manage(
            "deliver", "--now", at.isoformat(), "--simulated-clock", "--batch-size", "25", env=env
        )
        for _ in range(WORKERS)
    ]
    counts = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, f"deliver failed:\n{out}\n{err}"
        counts.append(
            (int(re.search(r"claimed (\d+)", out)[1]), int(re.search(r"sent (\d+)", out)[1]))
        )
    return counts


@pytest.mark.django_db(transaction=True)
def test_concurrent_deliver_processes_send_each_row_exactly_once(make_user, fake_telegram):
    """Exactly once across processes: three deliver workers sharing nothing but the
    database, as in production, one fake Telegram, 300 rows. Every row's message
    lands once — not zero times, not twice — and the id each row stores is the
    one the server handed out for it. Some sends fail (a fixed-seed fault rate),
    so retries across runs are part of it."""
    now = timezone.now().replace(microsecond=0)
    users = [
        make_user(channel="telegram", telegram_chat_id=str(700_000 + i)) for i in range(TENANTS)
    ]
    for i, user in enumerate(users):
        for j in range(ROWS_PER_TENANT):
            queue_follow_up(
                user,
                f"Task {i}-{j}",
                now=now,
                starts_in=timedelta(minutes=12 + j),
                fired_ago=timedelta(seconds=5 + j),
            )
    total = TENANTS * ROWS_PER_TENANT
    fake_telegram.plan.at_rate(0.05, seed=20260402, faults=[telegram.SERVER_ERROR])
    env = subprocess_env(
        TELEGRAM_API_BASE_URL=fake_telegram.base_url,
        TELEGRAM_BOT_TOKEN=BOT_TOKEN,
        CHANNEL_TIMEOUT_SECONDS="5",
        # Telegram's 25/s would stretch a round to 12 s; at 100/s the first round
        # still lasts seconds, so the workers overlap (asserted below).
        NUDGE_TELEGRAM_RATE="100",
        LOG_LEVEL="WARNING",
        DEBUG="true",  # the console channel only sends in development (issue 23)
    )

    rounds = []
    for round_number in range(MAX_ROUNDS):
        rounds.append(_run_workers(now + timedelta(minutes=round_number), env))
        if len(fake_telegram.delivered) == total:
            break

    delivered = fake_telegram.delivered
    texts = Counter(d.text for d in delivered)
    assert len(delivered) == total, f"{len(delivered)} of {total} arrived"
    assert max(texts.values()) == 1, "a message arrived twice"
    assert len(fake_telegram.sends()) > total, "the fault rate produced no retries"
    # What the workers say they sent is what arrived; every claim was one send call.
    assert sum(sent for counts in rounds for _, sent in counts) == total, rounds
    assert sum(claimed for counts in rounds for claimed, _ in counts) == len(
        fake_telegram.sends()
    ), rounds
    assert sum(1 for _, sent in rounds[0] if sent) > 1, f"the workers never overlapped: {rounds}"

    chat_of_user = {user.pk: str(700_000 + i) for i, user in enumerate(users)}
    stored = {}
    for user in users:
        for row in rows_of(user):
            assert row.outcome == "sent", (row.pk, row.outcome, row.last_error)
            stored[row.provider_message_id] = row
    assert set(stored) == {d.message_id for d in delivered}
    # Each id belongs to the chat the row's owner configured.
    for d in delivered:
        assert chat_of_user[stored[d.message_id].user_id] == d.recipient
    assert ScheduledSend.objects.count() == 0  # unscoped: row-level security hides every row


class FirstRunMidClaim(threading.Thread):
    """A deliver run inside its claim statement's transaction: the rows it took are
    locked and not yet committed (a large batch, a slow disk), until ``finish``."""

    def __init__(self, limit: int) -> None:
        super().__init__(name="first-deliver-run")
        self.limit = limit
        self.claimed_ids: list[int] = []
        self.backend_pid: int | None = None
        self.holding = threading.Event()
        self.finish = threading.Event()

    def run(self) -> None:
        try:
            with rls_bypass(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.backend_pid = cursor.fetchone()[0]
                config = NudgeConfig.from_settings()
                cursor.execute(statements.CLAIM_DUE, claim_params(DUE, config, self.limit))
                self.claimed_ids = [row[0] for row in cursor.fetchall()]
                self.holding.set()
                self.finish.wait(timeout=60)
        finally:
            self.holding.set()
            connection.close()


def _backends_waiting_for(pid: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [pid]
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_second_deliver_run_steps_over_rows_another_run_has_locked(make_user, recording_channel):
    """Two deliver runs at once: the second sends the rows the first did not take,
    at once, instead of queueing behind the first's row locks (SKIP LOCKED).

    Waiting would make every overlapping run as slow as the slowest claim, and
    a run stuck behind locks spends its minute sending nothing.
    """
    _seed_due_rows(make_user, tenants=4, per_tenant=2)
    reports, errors = [], []

    def second_run() -> None:
        try:
            reports.append(run_deliver(DUE))
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    first = FirstRunMidClaim(limit=4)
    second = threading.Thread(target=second_run, name="second-deliver-run")
    waited_for_locks = False
    first.start()
    try:
        assert first.holding.wait(timeout=10) and len(first.claimed_ids) == 4
        second.start()
        deadline = time.monotonic() + 30
        while second.is_alive() and time.monotonic() < deadline:
            if _backends_waiting_for(first.backend_pid):
                waited_for_locks = True
                break
            second.join(timeout=0.02)
    finally:
        first.finish.set()
        first.join(timeout=10)
        if second.ident is not None:
            second.join(timeout=30)
    assert not waited_for_locks, "the second run waited for rows the first run had locked"
    assert not second.is_alive(), "the second run did not finish within 30 s"
    assert errors == []
    [report] = reports
    assert (report.claimed, report.sent) == (4, 4)
    with support_scope():
        outcomes = dict(ScheduledSend.objects.values_list("id", "outcome"))
    assert {row_id for row_id, outcome in outcomes.items() if outcome == "sent"} == (
        set(outcomes) - set(first.claimed_ids)
    ), "the second run sent exactly the rows the first had not claimed"
    assert len(recording_channel.sent) == 4
