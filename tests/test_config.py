"""The product's knobs: one validated object, read everywhere, refused loudly when unsafe."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from core.checks import nudge_settings_are_valid
from core.config import KNOBS, NudgeConfig, knob_settings

PROJECT = Path(__file__).resolve().parent.parent
# Read straight from Django settings on purpose: database role names (settings
# derive them; the bootstrap and migrations need them before any config) and
# the calendar token keys (a secret, read by the one module that uses it).
DIRECT_READS_ALLOWED = re.compile(r"settings\.(NUDGE_DB_\w+|CALENDAR_TOKEN_KEYS)")
KNOB = re.compile(r"settings\.(NUDGE|CALENDAR|ICS)_\w+|getattr\(settings, f?\"(NUDGE|CALENDAR)")


def test_no_module_reads_a_knob_around_the_config():
    """One home: a knob read beside ``NudgeConfig`` escapes its validation and its docs."""
    offenders = []
    for path in PROJECT.glob("*/**/*.py"):
        relative = path.relative_to(PROJECT)
        if (
            relative.parts[0] in {"tests", "bench", ".venv", "var"}
            or "migrations" in relative.parts
        ):
            continue
        if relative.as_posix() in {"core/config.py", "nudgeproject/settings.py"}:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = DIRECT_READS_ALLOWED.sub("", line)
            if KNOB.search(code) and not code.lstrip().startswith(("#", '"', "`")):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == []


def test_check_names_every_unsafe_knob(settings):
    settings.NUDGE_BATCH_SIZE = 0
    settings.NUDGE_LEASE_SECONDS = 10
    settings.CALENDAR_HTTP_TIMEOUT_SECONDS = 0

    errors = nudge_settings_are_valid()

    assert {error.id for error in errors} == {"nudge.E001"}
    assert [error.msg for error in errors] == [
        "NUDGE_BATCH_SIZE must be at least 1",
        "CALENDAR_HTTP_TIMEOUT_SECONDS must be positive",
        "NUDGE_LEASE_SECONDS must be at least twice NUDGE_RUN_BUDGET_SECONDS "
        "(lease 10s, budget 55s)",
    ]


def test_check_is_quiet_with_the_defaults():
    assert nudge_settings_are_valid() == []


def test_manage_py_check_stops_on_an_unsafe_knob(settings, db):
    settings.NUDGE_MAX_NUDGES_PER_USER = 0
    with pytest.raises(SystemCheckError, match="NUDGE_MAX_NUDGES_PER_USER must be at least 1"):
        call_command("check")


def test_a_knob_of_the_wrong_type_is_a_check_error_not_a_crash(settings):
    settings.NUDGE_GRACE_MINUTES = "fifteen"

    [error] = nudge_settings_are_valid()

    assert "missing or of the wrong type" in error.msg


def test_a_sweep_refuses_an_unsafe_config_with_the_reason(settings):
    settings.NUDGE_SMOOTHING_HEADROOM = 1.5
    with pytest.raises(ValueError, match=r"NUDGE_SMOOTHING_HEADROOM must be in \(0, 1\]"):
        NudgeConfig.from_settings()


def test_the_default_lead_cannot_exceed_what_the_schema_stores(settings):
    settings.NUDGE_DEFAULT_LEAD_MINUTES = 24 * 60 + 1
    with pytest.raises(ValueError, match="NUDGE_DEFAULT_LEAD_MINUTES must be between 0 and 1440"):
        NudgeConfig.from_settings()


def test_sync_and_materialize_read_the_same_window(settings):
    settings.NUDGE_GRACE_MINUTES = 20
    settings.NUDGE_LOOKAHEAD_MINUTES = 60
    settings.NUDGE_MAX_LEAD_MINUTES = 30
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert NudgeConfig.from_settings().subject_window(now) == (
        now - timedelta(minutes=20),
        now + timedelta(minutes=90),
    )


def public_settings() -> set[str]:
    """What an operator sets: each environment variable ``settings.py`` reads with
    ``env`` (not ``seam``: the fakes' addresses), and the public knobs."""
    source = (PROJECT / "nudgeproject" / "settings.py").read_text()
    read = set(re.findall(r'\benv\.\w+\(\s*"([A-Z][A-Z0-9_]*)"', source))
    return read | {knob.setting for knob in KNOBS if knob.public}


def operations_settings_table() -> dict[str, str]:
    """docs/OPERATIONS.md's "Settings" table: setting -> its default column."""
    operations = (PROJECT / "docs" / "OPERATIONS.md").read_text()
    section = operations.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \| ([^|]*) \|", section, re.M))


def test_the_public_settings_fit_one_table():
    """An operator can hold them in their head: at most 30, each in the table, none
    missing from it, and each public knob with its one default."""
    table = operations_settings_table()
    assert len(public_settings()) <= 30
    assert set(table) == public_settings()
    for knob in KNOBS:
        assert knob.public or f"`{knob.setting}`" not in table, knob.setting
        if not knob.public:
            continue
        default = table[knob.setting].strip()
        if isinstance(knob.default, str):
            assert default == (f"`{knob.default}`" if knob.default else "empty"), knob.setting
        else:
            assert float(default.strip("`")) == float(knob.default), knob.setting


def test_each_default_is_stated_once():
    """A knob's default lives in ``KNOBS`` alone: settings.py names no knob of its own."""
    settings_source = (PROJECT / "nudgeproject" / "settings.py").read_text()
    for knob in KNOBS:
        assert f"{knob.setting} =" not in settings_source, knob.setting


def test_a_public_knob_set_in_the_environment_reaches_the_config(monkeypatch):
    import environ

    monkeypatch.setenv("NUDGE_DEFAULT_LEAD_MINUTES", "7")
    values = knob_settings(environ.Env())
    assert values["NUDGE_DEFAULT_LEAD_MINUTES"] == 7
    assert values["NUDGE_TELEGRAM_RATE"] == 25.0  # unset: the default


def test_internal_tuning_is_not_read_from_the_environment_and_says_so(monkeypatch):
    """Tuning is the product's constant: set in the environment it changes nothing,
    and ``manage.py check`` warns with its name; a test changes it through NUDGE_TUNING."""
    import environ

    from core.checks import no_tuning_in_the_environment

    monkeypatch.setenv("NUDGE_GRACE_MINUTES", "7")
    assert knob_settings(environ.Env())["NUDGE_GRACE_MINUTES"] == 15
    [warning] = no_tuning_in_the_environment()
    assert warning.msg.startswith("NUDGE_GRACE_MINUTES is set in the environment")

    monkeypatch.setenv("NUDGE_TUNING", json.dumps({"NUDGE_GRACE_MINUTES": 7}))
    assert knob_settings(environ.Env())["NUDGE_GRACE_MINUTES"] == 7
    assert no_tuning_in_the_environment() == []


def test_tuning_that_names_a_public_setting_or_nothing_is_refused(monkeypatch):
    import environ
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.setenv("NUDGE_TUNING", json.dumps({"NUDGE_TELEGRAM_RATE": 1}))
    with pytest.raises(ImproperlyConfigured, match="NUDGE_TELEGRAM_RATE"):
        knob_settings(environ.Env())


# Where the config is built: entry points — commands, views, cron routes, the
# admin's pages, the system check — and the few functions that start a piece of
# work on their own (a sweep's run, a re-plan after a user's change, a new row's
# default). Everything below them is handed the config it runs with.
ENTRY_MODULES = re.compile(
    r"(^|/)(management/commands/[^/]+|[a-z_]*views|cron_routes|[a-z_]*api|webhooks|admin|admin_site|checks)\.py$"
    r"|/admin/[^/]+\.py$"
)
ENTRY_FUNCTIONS = {
    "sweeps/deliver.py": {"run_deliver"},
    "sweeps/materialize.py": {"run_materialize"},
    "sweeps/replan.py": {"refresh_queue"},
    "console/health.py": {"check_health"},
    "sweeps/sync_changed.py": {"run_sync_changed"},
    # Senders are built from a dotted path (NUDGE_CHANNEL_BACKENDS) with no arguments,
    # and read their own provider settings as they start.
    "messaging/telegram/send.py": {"__init__"},
    "messaging/whatsapp/send.py": {"__init__"},
    "accounts/models.py": {"default_lead_minutes"},
    # django-axes calls these for each sign-in attempt; Django's reset view calls save().
    "portal/signin.py": {"failure_limit", "lockout_duration", "save"},
}


def test_the_config_is_built_at_entry_points_and_passed_down():
    offenders = []
    for path in sorted(PROJECT.glob("*/**/*.py")):
        relative = path.relative_to(PROJECT).as_posix()
        if relative.split("/")[0] in {"tests", "bench", ".venv", "var"} or ENTRY_MODULES.search(
            relative
        ):
            continue
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "from_settings"
                    and function.name not in ENTRY_FUNCTIONS.get(relative, set())
                    and relative != "core/config.py"
                ):
                    offenders.append(f"{relative}:{node.lineno} in {function.name}()")
    assert sorted(set(offenders)) == []
