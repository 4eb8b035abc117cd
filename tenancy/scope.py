"""The only place that sets ``app.*`` settings or switches database roles: each scope
opens its own transaction with transaction-local settings (docs/ARCHITECTURE.md, "Tenant
isolation"). Scopes refuse to nest, to run inside a transaction they do not own, and to run
with autocommit off: a ``SET LOCAL`` would otherwise outlive the block.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

from django.conf import settings
from django.db import Error, connection, transaction
from django.db.backends.utils import CursorWrapper

from core.ids import valid_id

TENANT_SETTING = "app.current_user_id"
PLANNING_SETTING = "app.planning_user_ids"
_ACTIVE_FLAG = "_nudge_scope"


class ScopeError(RuntimeError):
    """A scope was used in a way that could leak or widen tenant access."""


def _validated_user_id(user_id: object) -> int:
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise ScopeError(f"tenant_scope needs an integer user id, got {type(user_id).__name__}")
    if not valid_id(user_id):
        raise ScopeError(f"tenant_scope needs a positive bigint user id, got {user_id}")
    return user_id


# What a scope sets, transaction-locally; ``set_config('role', …, true)`` is ``SET LOCAL
# ROLE`` with the same membership check. Bound parameters: no value is spliced into SQL.
# Prefixed to statements in one round trip, each statement is separate, so a policy's
# InitPlan sees the tenant when it starts.
_ENTER = (
    f"SELECT set_config('{TENANT_SETTING}', %(_scope_tenant)s, true), "
    "set_config('role', %(_scope_role)s, true), "
    f"set_config('{PLANNING_SETTING}', %(_scope_planning)s, true)"
)


def _enter(relaxed_commit: bool, read_only: bool) -> str:
    if read_only:
        return _ENTER + ", set_config('transaction_read_only', 'on', true)"
    return _ENTER + (", set_config('synchronous_commit', 'off', true)" if relaxed_commit else "")


def _scope_params(tenant: str = "", role: str = "none", planning: str = "") -> dict[str, str]:
    return {
        "_scope_tenant": tenant,
        "_scope_role": role,
        "_scope_planning": planning,
    }


@contextmanager
def _owned_transaction(
    kind: str,
    *,
    tenant: str = "",
    role: str = "none",
    relaxed_commit: bool = False,
    read_only: bool = False,
    planning: str = "",
) -> Iterator[None]:
    active = getattr(connection, _ACTIVE_FLAG, None)
    if active:
        raise ScopeError(f"{kind} cannot be opened inside {active}; scopes do not nest")
    if not connection.in_atomic_block and not connection.get_autocommit():
        # atomic() would neither begin nor commit: SET LOCAL would outlive the scope.
        raise ScopeError(f"{kind} needs autocommit on; it would outlive its block otherwise")
    # Only Django's test wrapper may enclose a scope; durable=True enforces it again.
    inside_test_wrapper = connection.in_atomic_block
    if inside_test_wrapper and not all(
        getattr(block, "_from_testcase", False) for block in connection.atomic_blocks
    ):
        raise ScopeError(f"{kind} must own its transaction; it was opened inside another one")
    with transaction.atomic(durable=True):
        setattr(connection, _ACTIVE_FLAG, kind)
        try:
            with connection.cursor() as cursor:
                enter = _enter(relaxed_commit, read_only)
                cursor.execute(enter, _scope_params(tenant, role, planning))
                yield
                if read_only:
                    # A rollback also undoes the settings inside a test wrapper.
                    transaction.set_rollback(True)
                # Under a test wrapper the block is a savepoint, whose release
                # would keep SET LOCAL alive: reset it explicitly.
                elif inside_test_wrapper and not connection.needs_rollback:
                    cursor.execute(_ENTER, _scope_params())
        finally:
            setattr(connection, _ACTIVE_FLAG, None)


def tenant_scope(user_id: int, *, relaxed_commit: bool = False) -> AbstractContextManager[None]:
    """Run the block in a transaction that sees only ``user_id``'s rows. ``relaxed_commit``
    (``synchronous_commit = off``) is for work the next run derives again; never delivery."""
    user_id = _validated_user_id(user_id)
    kind = f"tenant_scope({user_id})"
    return _owned_transaction(kind, tenant=str(user_id), relaxed_commit=relaxed_commit)


@contextmanager
def tenant_reads() -> Iterator[Callable[[int, str, dict[str, object]], tuple | None]]:
    """One READ ONLY transaction (ending in a rollback) that reads several tenants' rows:
    yields ``read(user_id, statement, params)``, the first row of ``statement`` seeing
    only that user's rows, in one round trip."""
    with _owned_transaction("tenant_reads()", read_only=True):

        def read(user_id: int, statement: str, params: dict[str, object]) -> tuple | None:
            tenant = _scope_params(str(_validated_user_id(user_id)))
            with connection.cursor() as cursor:
                cursor.execute(f"{_ENTER}; {statement}", {**params, **tenant})
                cursor.nextset()
                return cursor.fetchone()

        yield read


def tenant_read(user_id: int, statement: str, params: dict[str, object]) -> list[tuple]:
    """``statement`` seeing only ``user_id``'s rows, read-only, in one round trip; its rows."""
    return tenant_statements(user_id, [statement], params, read_only=True)[0]


def tenant_statements(
    user_id: int,
    statements: Sequence[str],
    params: dict[str, object],
    *,
    relaxed_commit: bool = False,
    read_only: bool = False,
) -> list[list[tuple]]:
    """``statements`` (sharing named ``params``) seeing only ``user_id``'s rows, as one
    transaction; each statement's rows (see ``_one_transaction``)."""
    user_id = _validated_user_id(user_id)
    kind = f"tenant_scope({user_id})"
    return _one_transaction(kind, str(user_id), statements, params, relaxed_commit, read_only)


def unscoped_relaxed(
    statement: str, params: dict[str, object], *, first: Sequence[str] = ()
) -> list[tuple]:
    """One statement that sees no tenant's rows, committed without waiting for the disk;
    its rows: for bookkeeping whose loss in a server crash is harmless (a shared budget).
    ``first`` runs before it in the same transaction and round trip. A row it locks is
    never held across a client's pause (see ``_one_transaction``)."""
    statements = [*first, statement]
    return _one_transaction("unscoped_relaxed()", "", statements, params, True, False)[-1]


def _one_transaction(
    kind: str,
    tenant: str,
    statements: Sequence[str],
    params: dict[str, object],
    relaxed_commit: bool,
    read_only: bool,
) -> list[list[tuple]]:
    """Outside any transaction: the scope's settings and ``statements`` in one round trip,
    one implicit transaction (read-only if asked; client-side binding), and a connection
    the server dropped is closed so the next use reconnects. Inside one: a scope of its
    own, one statement after another."""
    if connection.in_atomic_block or not connection.get_autocommit():
        with (
            _owned_transaction(kind, tenant=tenant, relaxed_commit=relaxed_commit),
            connection.cursor() as cursor,
        ):
            return run_statements(cursor, statements, params)
    enter = _enter(relaxed_commit, read_only)
    try:
        with connection.cursor() as cursor:
            cursor.execute("; ".join([enter, *statements]), {**params, **_scope_params(tenant)})
            answers = []
            for _statement in statements:
                cursor.nextset()
                answers.append(cursor.fetchall() if cursor.description else [])
            return answers
    except Error:
        if not connection.is_usable():
            connection.close()
        raise


def run_statements(
    cursor: CursorWrapper, statements: Sequence[str], params: dict[str, object]
) -> list[list[tuple]]:
    """Each statement in turn on ``cursor`` (in a scope already open); their rows."""
    answers = []
    for statement in statements:
        cursor.execute(statement, params)
        answers.append(cursor.fetchall() if cursor.description else [])
    return answers


def rls_bypass() -> AbstractContextManager[None]:
    """Run the block as the sweeper role: every tenant's queue rows, nothing else. Only
    the claim, the settle-up and their bookkeeping belong here."""
    return _owned_transaction("rls_bypass()", role=settings.NUDGE_DB_SWEEPER_ROLE)


def planning_scope(user_ids: Sequence[int]) -> AbstractContextManager[None]:
    """Run the block as the planner role, seeing the rows of ``user_ids`` and no one else's.
    For materialize alone; the commit is relaxed (the next run derives it all again)."""
    ids = sorted({_validated_user_id(user_id) for user_id in user_ids})
    if not ids:
        raise ScopeError("planning_scope needs at least one user id")
    return _owned_transaction(
        f"planning_scope({len(ids)} users)",
        role=settings.NUDGE_DB_PLANNER_ROLE,
        relaxed_commit=True,
        planning=",".join(map(str, ids)),
    )


# The name ``current_scope()`` gives the admin's support scope while it is open.
SUPPORT_SCOPE = "support_scope()"


def support_scope() -> AbstractContextManager[None]:
    """Run the block as the support role: the staff admin's cross-tenant view."""
    return _owned_transaction(SUPPORT_SCOPE, role=settings.NUDGE_DB_SUPPORT_ROLE)


def current_scope() -> str | None:
    """Which scope the connection is in, for assertions and error messages."""
    return getattr(connection, _ACTIVE_FLAG, None)
