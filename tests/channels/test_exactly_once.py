"""Exactly once, across processes: three deliver workers, one fake Telegram, hundreds of rows.

The workers are separate ``manage.py deliver`` processes sharing nothing but
the database, as in production. Every row's message must land at the server
once — not zero times, not twice — and the id each row stores must be the
one the server handed out for it. Some sends fail (a fixed-seed fault rate)
so retries across runs are part of the test.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduled_sends.models import ScheduledSend
from tests.channels.queue import queue_follow_up, rows_of
from tests.fakes import telegram_server as telegram
from tests.fakes.telegram_server import BOT_TOKEN
from tests.support.processes import manage, subprocess_env

TENANTS = 60
ROWS_PER_TENANT = 5
WORKERS = 3
MAX_ROUNDS = 6


def run_workers(at, env) -> list[int]:
    """Run the workers side by side; how many messages each one says it sent."""
    workers = [
        manage("deliver", "--now", at.isoformat(), "--batch-size", "25", env=env)
        for _ in range(WORKERS)
    ]
    sent = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, f"deliver failed:\n{out}\n{err}"
        sent.append(int(re.search(r"sent (\d+)", out)[1]))
    return sent


@pytest.mark.django_db(transaction=True)
def test_three_workers_deliver_every_row_exactly_once(make_user, fake_telegram):
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
    )

    sent_by_round = []
    for round_number in range(MAX_ROUNDS):
        sent_by_round.append(run_workers(now + timedelta(minutes=round_number), env))
        if len(fake_telegram.delivered) == total:
            break

    delivered = fake_telegram.delivered
    texts = Counter(d.text for d in delivered)
    assert len(delivered) == total, f"{len(delivered)} of {total} arrived"
    assert max(texts.values()) == 1, "a message arrived twice"
    assert len(fake_telegram.sends()) > total, "the fault rate produced no retries"
    # What the workers say they sent is what arrived.
    assert sum(map(sum, sent_by_round)) == total, sent_by_round
    print(f"sent per worker per round: {sent_by_round}; send calls: {len(fake_telegram.sends())}")

    chat_of_user = {user.pk: str(700_000 + i) for i, user in enumerate(users)}
    stored = {}
    for user in users:
        for row in rows_of(user):
            assert row.outcome == "sent", (row.pk, row.outcome, row.last_error)
            stored[row.provider_message_id] = row
    server_ids = {d.message_id for d in delivered}
    assert set(stored) == server_ids
    # Each id belongs to the chat the row's owner configured.
    for d in delivered:
        assert chat_of_user[stored[d.message_id].user_id] == d.recipient
    assert ScheduledSend.objects.count() == 0  # unscoped: row-level security hides every row
