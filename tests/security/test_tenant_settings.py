"""Tenant-setting abuse: SQL in the value, a persistent connection handed from one
request to the next, and only one module allowed to touch the setting at all."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from django.core.signals import request_finished, request_started
from django.db import DatabaseError, connection, transaction

from accounts.models import DeliverySettings
from followups.models import FollowUp
from scheduled_sends.models import ScheduledSend
from tenancy.scope import ScopeError, current_scope, tenant_scope
from tests.conftest import utc
from tests.support.queue import queue_nudge

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOW = utc(2026, 12, 2, 15, 0)


def _seed(user) -> None:
    with tenant_scope(user.pk):
        FollowUp.objects.create(user=user, title=f"secret of {user.username}", due_at=NOW)


def _visible() -> dict[str, int]:
    """What an unscoped request can see, per tenant table."""
    with connection.cursor() as cursor:
        counts = {}
        for table in ("follow_ups", "delivery_settings", "scheduled_sends"):
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 — fixed names
            counts[table] = cursor.fetchone()[0]
        return counts


def _session() -> tuple[int, str | None, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_backend_pid(), current_setting('app.current_user_id', true), current_user"
        )
        return cursor.fetchone()


# --- SQL in the value -------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "1; DROP TABLE follow_ups; --",
        "1' OR '1'='1",
        "1) OR (1=1",
        "(SELECT user_id FROM follow_ups LIMIT 1)",
        "1 UNION SELECT 2",
        "1e3",
        "∞",
    ],
)
def test_sql_in_the_tenant_value_is_data_never_rows(make_user, value):
    a, b = make_user("alice"), make_user("bob")
    _seed(a)
    _seed(b)
    with pytest.raises(ScopeError):
        with tenant_scope(value):  # type: ignore[arg-type]
            pass
    # Even set directly (only scope.py may, see the scan below), it is a bound value that
    # fails the policy's bigint cast: an error, never a widened view.
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('app.current_user_id', %s, true)", [value])
        cursor.execute("SELECT title FROM follow_ups")
        cursor.fetchall()
    with tenant_scope(a.pk):
        assert FollowUp.objects.count() == 1  # nothing was dropped
    assert _visible()["follow_ups"] == 0


# --- a persistent connection reused by the next request -----------------------------


@pytest.fixture
def persistent_connection():
    """CONN_MAX_AGE > 0: the connection outlives the request, as with a pooled worker."""
    original = connection.settings_dict["CONN_MAX_AGE"]
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = 600
    connection.ensure_connection()
    yield connection
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = original


def _request(body) -> None:
    """One request's life as Django's handler lives it: the signals around the view."""
    request_started.send(sender=None)
    try:
        body()
    finally:
        request_finished.send(sender=None)


@pytest.mark.django_db(transaction=True)
def test_the_next_request_on_a_reused_connection_sees_nothing(make_user, persistent_connection):
    a, b = make_user("alice"), make_user("bob")
    _seed(a)
    _seed(b)
    seen: dict[str, object] = {}

    def alices_request():
        with tenant_scope(a.pk):
            seen["alice"] = list(FollowUp.objects.values_list("title", flat=True))
            seen["pid"] = _session()[0]

    def alices_crashing_request():
        with tenant_scope(a.pk):
            FollowUp.objects.count()
            raise RuntimeError("the view crashed inside the scope")

    def alices_failing_query():
        with tenant_scope(a.pk), connection.cursor() as cursor:
            cursor.execute("SELECT 1/0")

    def next_request():
        seen["next"] = _visible()
        seen["session"] = _session()
        seen["orm"] = FollowUp.objects.count() + DeliverySettings.objects.count()

    for first in (alices_request, alices_crashing_request, alices_failing_query):
        try:
            _request(first)
        except (RuntimeError, DatabaseError):
            pass
        _request(next_request)
        pid, setting, role = seen["session"]
        assert pid == seen["pid"], "the connection was not reused: the test proves nothing"
        assert setting in ("", None)
        assert role == connection.settings_dict["USER"]
        assert seen["next"] == {"follow_ups": 0, "delivery_settings": 0, "scheduled_sends": 0}
        assert seen["orm"] == 0
        assert current_scope() is None
    assert seen["alice"] == ["secret of alice"]


@pytest.mark.django_db(transaction=True)
def test_a_scope_abandoned_mid_request_does_not_reach_the_next_request(
    make_user, persistent_connection
):
    """A scope whose block never exits (a killed greenlet, an abandoned generator):
    Django's end-of-request check sees the unfinished transaction and closes the
    connection, so the SET LOCAL dies with the server-side transaction. The next
    request on that thread fails closed — an error, never alice's rows."""
    a = make_user("alice")
    _seed(a)
    abandoned = tenant_scope(a.pk)

    def leaky_request():
        abandoned.__enter__()
        assert FollowUp.objects.count() == 1

    _request(leaky_request)
    assert connection.closed_in_transaction, "a connection mid-transaction was kept for reuse"
    seen: dict[str, object] = {}

    def next_request():
        try:
            seen["visible"] = _visible()
        except DatabaseError as exc:
            seen["error"] = exc

    try:
        _request(next_request)
        assert "visible" not in seen or seen["visible"] == {
            "follow_ups": 0,
            "delivery_settings": 0,
            "scheduled_sends": 0,
        }
        assert "error" in seen or "visible" in seen
        print("next request after an abandoned scope:", seen)
    finally:
        _unwind(abandoned)
    # Once the abandoned block is unwound, the thread's next connection is clean.
    assert _visible() == {"follow_ups": 0, "delivery_settings": 0, "scheduled_sends": 0}
    assert _session()[1] in ("", None)


def _unwind(abandoned) -> None:
    """Exit the abandoned block as an error would, then drop the dead connection."""
    try:
        abandoned.__exit__(RuntimeError, RuntimeError("abandoned"), None)
    except DatabaseError:
        pass
    connection.closed_in_transaction = False
    connection.needs_rollback = False
    connection.in_atomic_block = False
    connection.atomic_blocks = []
    connection.savepoint_ids = []
    connection.connection = None  # the next query connects afresh


# --- only tenancy/scope.py may set the tenant or switch roles --------------------------

# A transaction's own lock or statement timeout (partition maintenance) is not a
# tenant or a role: ``SET LOCAL lock_timeout`` is allowed anywhere.
FORBIDDEN = re.compile(
    r"set_config\s*\(|SET\s+LOCAL\b(?!\s+(?:lock|statement)_timeout\b)|SET\s+ROLE\b"
    r"|SET\s+SESSION\b|app\.current_user_id",
    re.IGNORECASE,
)
ALLOWED_FILE = "tenancy/scope.py"
SKIPPED_DIRS = {"tests", "migrations", ".venv", "venv", "var", ".git", "node_modules"}


def _project_files() -> list[Path]:
    files = []
    for path in PROJECT_ROOT.rglob("*"):
        parts = set(path.relative_to(PROJECT_ROOT).parts)
        if parts & SKIPPED_DIRS or any(p.startswith(".") for p in parts) or not path.is_file():
            continue
        if path.suffix in {".py", ".sql", ".sh", ".html", ".txt", ".toml", ".cfg", ".ini"}:
            files.append(path)
    return files


def _code_only(source: str) -> str:
    """Python source without comments and docstrings: what can run."""
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add((body[0].lineno, body[0].col_offset))
    kept = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            continue
        if token.type == tokenize.STRING and token.start in docstrings:
            continue
        kept.append(token.string)
    return " ".join(kept)


def _offences(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    code = _code_only(text) if path.suffix == ".py" else text
    return sorted({match.group(0) for match in FORBIDDEN.finditer(code)})


def test_only_the_scope_module_sets_the_tenant_or_switches_roles():
    offences = {}
    for path in _project_files():
        relative = path.relative_to(PROJECT_ROOT).as_posix()
        if relative == ALLOWED_FILE:
            continue
        found = list(_offences(path))
        if found:
            offences[relative] = found
    assert offences == {}, (
        f"only tenancy/scope.py may set app.current_user_id or switch roles; found {offences}"
    )


def test_the_scan_is_not_vacuous():
    scope = PROJECT_ROOT / ALLOWED_FILE
    assert "set_config(" in set(_offences(scope))
    assert len(_project_files()) > 20
    # Comments and docstrings are prose, not capability; code strings are caught.
    assert _offences_in("x = 1  # SET ROLE in a comment\n") == []
    assert _offences_in('"""Docs: SET LOCAL ROLE."""\n') == []
    assert _offences_in('q = "SELECT set_config(%s, %s, false)"\n') == ["set_config("]
    assert _offences_in("q = \"SET LOCAL lock_timeout = '5s'\"\n") == []
    assert _offences_in('q = "SET LOCAL app.x = 1"\n') == ["SET LOCAL"]
    assert _offences_in('q = f"set   role {name}"\n') == ["set   role"]


def _offences_in(source: str) -> list[str]:
    return sorted({m.group(0) for m in FORBIDDEN.finditer(_code_only(source))})


def test_queue_rows_are_never_read_unscoped_through_the_orm(make_user):
    """Belt and braces for the scan: an unscoped ORM read of any tenant model is empty."""
    a = make_user("alice")
    _seed(a)
    queue_nudge(a.pk, ref_id=1, at=NOW, subject_starts_at=NOW)
    assert ScheduledSend.objects.count() == 0
    assert FollowUp.objects.count() == 0
    assert DeliverySettings.objects.count() == 0
