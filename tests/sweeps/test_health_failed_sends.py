"""Sends that do not happen never look like a quiet minute (issue: a console that
never says "All clear" while sends fail).

Telegram through the real python-telegram-bot against the fake Bot API: its
token unset, then revoked (the fake answers 401 to every call), then restored.
The console's headline, ``nudge_health`` and ``/metrics`` must say the same.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from console import metrics
from console.health import FAILING_MIN_ERRORS, check_health
from core.config import NudgeConfig
from scheduled_sends.models import SweepRun
from scheduled_sends.queue import transitions
from sweeps.deliver import run_deliver
from tests.channels.queue import queue_follow_up
from tests.conftest import utc
from tests.fakes.telegram_server import BOT_BLOCKED

NOW = utc(2026, 12, 4, 18, 0)
DUE = 20


def check(report, name: str):
    return next(c for c in report.checks if c.name == name)


@pytest.fixture
def telegram_users(make_user, telegram_settings):
    # Materialize ran: every other check may pass, so the verdict is the sends' own.
    SweepRun.objects.create(sweep=SweepRun.Sweep.MATERIALIZE, status="ok", as_of=NOW)
    return [make_user(channel="telegram", telegram_chat_id=str(1000 + n)) for n in range(DUE)]


def queue_due(users, at, title: str = "Call Anna"):
    return [queue_follow_up(user, title, now=at) for user in users]


def health_command(capsys, at) -> tuple[int, str]:
    try:
        call_command("nudge_health", "--now", at.isoformat())
        code = 0
    except SystemExit as exit_:
        code = int(exit_.code)
    return code, capsys.readouterr().out


def scrape(at) -> str:
    return metrics.render(at, NudgeConfig.from_settings(), check_health(at)).decode()


def test_an_unset_bot_token_turns_health_red_within_one_run_naming_the_setting(
    telegram_users, telegram_settings, capsys
):
    telegram_settings.TELEGRAM_BOT_TOKEN = ""
    queue_due(telegram_users, NOW)

    report = run_deliver(NOW)

    assert (report.sent, report.failed) == (0, DUE)
    [run] = SweepRun.objects.filter(sweep=SweepRun.Sweep.DELIVER)
    assert run.status == SweepRun.Status.FAILED  # not "ok" when every send failed on us
    assert "TELEGRAM_BOT_TOKEN" in run.error

    health = check_health(NOW + timedelta(seconds=30))
    assert not health.ok and health.verdict == "unhealthy"
    configured = check(health, "channels_configured")
    assert not configured.ok
    assert "telegram" in configured.detail and "TELEGRAM_BOT_TOKEN" in configured.detail
    assert f"{DUE} sends failed" in configured.detail

    code, out = health_command(capsys, NOW + timedelta(seconds=30))
    assert code == 1
    assert "FAIL channels_configured" in out and "TELEGRAM_BOT_TOKEN" in out
    assert out.rstrip().endswith("UNHEALTHY")

    text = scrape(NOW + timedelta(seconds=30))
    assert 'nudge_health_check_ok{check="channels_configured"} 0.0' in text
    assert 'nudge_health_verdict{verdict="unhealthy"} 1.0' in text


def test_the_deliver_command_that_fails_on_an_unset_token_says_why(
    telegram_users, telegram_settings, capsys
):
    """Its exit status was 1 while its line gave only counts ("failed 20"), like a run
    whose users had blocked the bot; the reason was in the run log alone."""
    telegram_settings.TELEGRAM_BOT_TOKEN = ""
    queue_due(telegram_users, NOW)

    with pytest.raises(SystemExit) as exit_:
        call_command("deliver", "--now", NOW.isoformat(), "--simulated-clock")

    assert exit_.value.code == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"deliver: claimed {DUE}, sent 0, skipped 0, retry 0, failed {DUE}")
    assert line.endswith(" — FAILED: [config] Telegram is not configured: TELEGRAM_BOT_TOKEN empty")


def test_a_revoked_token_asks_telegram_once_not_before_every_send(
    telegram_users, telegram_settings, fake_telegram
):
    telegram_settings.TELEGRAM_BOT_TOKEN = "987654321:AARevokedTokenRevokedToken000000"
    queue_due(telegram_users, NOW)

    report = run_deliver(NOW)

    assert (report.sent, report.failed) == (0, DUE)
    # getMe answered 401 once; nothing asks again for the rest of the run.
    assert len(fake_telegram.calls("getMe")) == 1
    assert fake_telegram.calls("sendMessage") == []
    configured = check(check_health(NOW + timedelta(seconds=30)), "channels_configured")
    assert not configured.ok and "TELEGRAM_BOT_TOKEN" in configured.detail


def test_restored_configuration_clears_the_check_once_a_send_goes_through(
    telegram_users, telegram_settings, fake_telegram, capsys
):
    good_token = telegram_settings.TELEGRAM_BOT_TOKEN
    telegram_settings.TELEGRAM_BOT_TOKEN = ""
    queue_due(telegram_users[:10], NOW)
    run_deliver(NOW)
    assert not check_health(NOW + timedelta(seconds=30)).ok

    telegram_settings.TELEGRAM_BOT_TOKEN = good_token
    later = NOW + timedelta(minutes=2)
    queue_due(telegram_users[10:], later, title="Water the plants")
    report = run_deliver(later)

    assert report.sent == DUE - 10
    health = check_health(later + timedelta(seconds=30))
    assert check(health, "channels_configured").ok
    assert health.ok and health.verdict == "healthy", health.checks
    code, out = health_command(capsys, later + timedelta(seconds=30))
    assert code == 0 and out.rstrip().endswith("healthy")


def test_a_few_refusals_are_a_warning_with_counts_not_all_clear(
    telegram_users, fake_telegram, capsys
):
    fake_telegram.plan.for_recipient("1000", BOT_BLOCKED)
    queue_due(telegram_users, NOW)

    run_deliver(NOW)

    health = check_health(NOW + timedelta(seconds=30))
    sends = check(health, "sends_succeeding")
    assert sends.ok and sends.warning
    assert f"1 of {DUE} send attempts failed" in sends.detail
    assert "refused" in sends.detail
    assert health.verdict == "warning"
    code, out = health_command(capsys, NOW + timedelta(seconds=30))
    assert code == 0
    assert "WARN sends_succeeding" in out and "warning(s)" in out.splitlines()[-1]
    assert 'nudge_health_verdict{verdict="warning"} 1.0' in scrape(NOW + timedelta(seconds=30))


def test_provider_errors_past_a_quarter_of_the_attempts_turn_red(telegram_users, fake_telegram):
    blocked = [str(1000 + n) for n in range(FAILING_MIN_ERRORS + 1)]
    for chat in blocked:
        fake_telegram.plan.for_recipient(chat, BOT_BLOCKED)
    queue_due(telegram_users, NOW)

    run_deliver(NOW)

    sends = check(check_health(NOW + timedelta(seconds=30)), "sends_succeeding")
    assert not sends.ok
    assert f"{len(blocked)} of {DUE} send attempts failed" in sends.detail


def test_a_row_waiting_for_its_retry_is_not_reported_unclaimed(
    telegram_users, fake_telegram, settings
):
    """A network error hands the row back to wait; health must not blame a dead cron."""
    [user] = telegram_users[:1]
    fake_telegram.stop()  # nobody answers: a transient network error
    [row] = queue_due([user], NOW - timedelta(minutes=3))

    report = run_deliver(NOW)
    assert report.retried == 1

    config = NudgeConfig.from_settings()
    # Still waiting for its retry, and then just claimable again: neither is "unclaimed".
    for at in (NOW + timedelta(seconds=30), NOW + config.retry_delay + timedelta(seconds=30)):
        health = check_health(at)
        assert health.figures["overdue_unclaimed"] == 0
        assert health.figures["waiting_to_retry"] == 1
        assert check(health, "overdue_unclaimed").ok
    # Claimable for longer than the overdue limit with no deliver run: now it is.
    late = NOW + config.retry_delay + config.overdue_after + timedelta(seconds=30)
    if late < row.intended_at + config.grace:
        assert check_health(late).figures["overdue_unclaimed"] == 1


def test_console_headline_agrees_with_nudge_health(
    telegram_users, telegram_settings, client, django_user_model, settings
):
    settings.SECURE_SSL_REDIRECT = False  # the test client speaks plain http
    staff = django_user_model.objects.create_user("support", is_staff=True, is_superuser=True)
    client.force_login(staff)
    telegram_settings.TELEGRAM_BOT_TOKEN = ""
    now = transitions.database_now()
    queue_due(telegram_users[:3], now)
    run_deliver(now)

    html = client.get(reverse("admin:index")).content.decode()

    assert "All clear" not in html
    assert "Needs attention:" in html
    assert 'data-check="channels_configured"' in html
    assert "TELEGRAM_BOT_TOKEN" in html
    # The deliver line no longer says nudges are being sent when none was.
    assert "Nudges are being sent" not in html
