"""Bad command-line input, tried as a cron author would: one line on stderr, a
non-zero exit, never a traceback, never a silent default."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tests.support.processes import subprocess_env

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["deliver", "--now", "yesterday"], "argument --now: 'yesterday' is not an ISO-8601"),
        (["deliver", "--batch-size", "0"], "argument --batch-size: '0' must be at least 1"),
        (["deliver", "--budget-seconds", "nan"], "argument --budget-seconds"),
        (["materialize", "--now", "2026-12-02T08:00"], "has no UTC offset"),
        (["materialize", "--user", "abc"], "argument --user: 'abc' is not a whole number"),
        (["nudge_health", "--now", "2026-13-45T00:00Z"], "is not an ISO-8601 date-time"),
        (["prune_sends", "--older-than", "0"], "argument --older-than: '0' is not 1 to 36500 days"),
        (["prune_sends", "--older-than", "99999999"], "'99999999' is not 1 to 36500 days"),
        (["prune_inbound", "--older-than", "99999999"], "'99999999' is not 1 to 36500 days"),
        (["make_partitions", "--days-ahead", "1400"], "'1400' is not 1 to 366 days"),
        (["seed_demo", "--users", "-3"], "argument --users: '-3' cannot be negative"),
        (["seed_demo", "--password", "short"], "argument --password: must be at least 8"),
        (["connect_ics", "one", "https://example.com/x.ics"], "argument user_id: 'one'"),
        (["sync_calendars", "--now", "tomorrow"], "argument --now: 'tomorrow'"),
        (["bootstrap_db"], "the following arguments are required: --admin-url"),
        (["rotate_calendar_keys", "--all"], "unrecognized arguments: --all"),
        (["telegram_poll", "--timeout", "99"], "argument --timeout: '99' must be at most 50"),
        (["telegram_poll", "--timeout", "-1"], "argument --timeout: '-1' cannot be negative"),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, list) else None,
)
def test_bad_arguments_get_one_line_and_a_failing_exit(argv, says):
    done = subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        # A server named (the test database's): settings then skip starting the
        # embedded one, and the argument error comes before any connection.
        env=subprocess_env(),
    )

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"manage.py {argv[0]}: error: ") and says in line


@pytest.mark.parametrize(
    "argv",
    [
        ["materialize", "--user", "999999", "--no-sync"],
        ["sync_calendars", "--user", "999999"],
        ["connect_ics", "999999", "https://example.com/x.ics"],
    ],
    ids=["materialize", "sync_calendars", "connect_ics"],
)
def test_a_user_that_does_not_exist_is_refused(db, argv):
    with pytest.raises(CommandError, match=r"^no user with id 999999$"):
        call_command(*argv)


def test_an_inactive_user_is_refused_by_the_sweep_that_skips_them(db):
    user = get_user_model().objects.create_user(username="gone", is_active=False)

    with pytest.raises(CommandError, match=f"user {user.pk} is not active"):
        call_command("materialize", "--user", str(user.pk), "--no-sync")


def test_a_bootstrap_that_cannot_connect_says_so_in_one_line():
    with pytest.raises(CommandError) as caught:
        call_command("bootstrap_db", "--admin-url", "postgres://nobody@127.0.0.1:1/none")

    assert str(caught.value).startswith("bootstrap failed: ")
    assert "\n" not in str(caught.value)


@pytest.mark.django_db
def test_a_missing_secret_key_is_one_line_not_a_traceback():
    """issue 33: without SECRET_KEY, ``run_sweeps`` outside development stopped with a
    traceback through Django's start-up. It names the setting in one line."""
    env = subprocess_env()
    env.pop("SECRET_KEY")
    done = subprocess.run(
        [sys.executable, "manage.py", "run_sweeps"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "nudge: SECRET_KEY is not set. It has no default outside the embedded development "
        "database. (docs/OPERATIONS.md lists the settings)"
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("NUDGE_TELEGRAM_RATE", "fast", "NUDGE_TELEGRAM_RATE must be a number, not 'fast'"),
        ("NUDGE_DEFAULT_LEAD_MINUTES", "7.5", "must be a whole number, not '7.5'"),
        ("LOG_LEVEL", "verbose", "LOG_LEVEL must be a logging level"),
        ("BEHIND_TLS_PROXY", "ture", "BEHIND_TLS_PROXY must be true or false, not 'ture'"),
        ("DEBUG", "maybe", "DEBUG must be true or false, not 'maybe'"),
    ],
)
def test_a_mistyped_setting_is_one_line_not_a_traceback(setting, value, says):
    """A public setting that is not of its kind stopped every command with a traceback
    through the settings module; it is named in one line, exit 2, like a missing one."""
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=subprocess_env(**{setting: value}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("nudge: ") and says in line


@pytest.mark.django_db
def test_a_lower_case_log_level_is_the_level():
    """``LOG_LEVEL=debug`` is what an operator writes; Python's logging knows only DEBUG."""
    done = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.LOG_LEVEL)"],
        cwd=ROOT,
        env=subprocess_env(LOG_LEVEL="debug"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "DEBUG"


def test_every_option_the_docs_give_a_command_is_one_it_takes():
    """An operator copies command lines from the README and OPERATIONS.md: each command
    named there exists and takes each option given it (the README once said
    ``axes_reset --username NAME``, which exits 2)."""
    from django.core.management import get_commands, load_command_class

    commands = get_commands()
    wrong = []
    for doc in ("README.md", "docs/OPERATIONS.md"):
        text = (ROOT / doc).read_text()
        for name, rest in re.findall(r"manage\.py ([a-z_]+)([^`|\n]*)", text):
            if name not in commands:
                wrong.append(f"{doc}: no command {name}")
                continue
            given = re.split(r">|&&|\|\||#|\)", rest)[0]
            parser = load_command_class(commands[name], name).create_parser("manage.py", name)
            for option in re.findall(r"--[a-z][a-z-]*", given):
                if option not in parser._option_string_actions:
                    wrong.append(f"{doc}: manage.py {name} {option}")
    assert wrong == []


def test_the_crontab_in_operations_is_the_one_deploy_installs():
    """OPERATIONS.md's crontab once ran make_partitions and prune_sends without owner.env,
    telling operators to put the owner's address in .env, which the web server reads."""

    def jobs(text: str) -> list[str]:
        return [line for line in text.splitlines() if line[:1] in ("*", *"0123456789")]

    operations = (ROOT / "docs" / "OPERATIONS.md").read_text()
    documented = operations.split("### crontab\n\n```cron\n", 1)[1].split("```", 1)[0]
    assert jobs(documented) == jobs((ROOT / "deploy" / "crontab").read_text())
