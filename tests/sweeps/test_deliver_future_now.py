"""Issue 24: "`deliver --now` in the future is refused outside tests/replays unless
`--dry-run` says what would be sent"."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from scheduled_sends.models import ScheduledSend, SweepRun
from sweeps.materialize import run_materialize
from tenancy.scope import support_scope
from tests.sweeps.factories import add_follow_up


@pytest.fixture
def due_in_an_hour(make_user, recording_channel):
    """A follow-up whose nudge is due in an hour; its row queued."""
    now = timezone.now()
    user = make_user()
    add_follow_up(user, now + timedelta(hours=1, minutes=10), title="Renew the domain")
    run_materialize(now)
    return user, now + timedelta(hours=1)


def _row() -> ScheduledSend:
    with support_scope():
        return ScheduledSend.objects.get()


def test_a_future_now_is_refused_and_sends_nothing(due_in_an_hour, recording_channel):
    """Issue 24, small things: "`deliver --now <a future instant>` really sends early"."""
    _, fire_at = due_in_an_hour
    later = (fire_at + timedelta(seconds=5)).isoformat()
    with pytest.raises(CommandError, match=r"is in the future .* would send those nudges early"):
        call_command("deliver", "--now", later, stdout=StringIO())
    assert recording_channel.sent == []
    assert _row().outcome is None and _row().claimed_at is None
    assert not SweepRun.objects.filter(sweep="deliver").exists()


def test_dry_run_says_what_would_be_sent_and_sends_nothing(due_in_an_hour, recording_channel):
    """Issue 24: "unless --dry-run says what would be sent" — the row, its user, its channel,
    its time; nothing claimed, sent or recorded."""
    user, fire_at = due_in_an_hour
    out = StringIO()
    call_command(
        "deliver", "--now", (fire_at + timedelta(seconds=5)).isoformat(), "--dry-run", stdout=out
    )
    text = out.getvalue()
    row = _row()
    assert "would claim 1 nudge; nothing was sent" in text
    assert f"#{row.pk} user:{user.pk} follow_up via console, due {fire_at:%Y-%m-%d %H:%M}" in text
    assert recording_channel.sent == []
    assert (row.outcome, row.claimed_at, row.attempts) == (None, None, 0)
    assert not SweepRun.objects.filter(sweep="deliver").exists()


def test_a_replay_and_a_simulated_clock_still_run(due_in_an_hour, recording_channel):
    """Issue 24: refused "outside tests/replays" — a past --now replays; a test driving its
    own clock says so with --simulated-clock and sends at that instant."""
    _, fire_at = due_in_an_hour
    call_command("deliver", "--now", timezone.now().isoformat(), stdout=StringIO())
    assert recording_channel.sent == []  # a replay of now: nothing was due yet
    out = StringIO()
    call_command(
        "deliver",
        "--now",
        (fire_at + timedelta(seconds=5)).isoformat(),
        "--simulated-clock",
        stdout=out,
    )
    assert "sent 1" in out.getvalue()
    assert len(recording_channel.sent) == 1
