"""The only place that sets ``app.*`` settings or switches database roles.

Every tenant table carries ``FORCE ROW LEVEL SECURITY`` with a policy that
admits a row only when ``user_id`` equals ``app.current_user_id``. Code reaches
tenant data in exactly one of three ways, each a context manager that opens
its own transaction and makes its setting transaction-local, so nothing can
leak to the next user of a pooled or persistent connection:

* :func:`tenant_scope` — one user's rows. Everything user-facing runs here.
* :func:`rls_bypass` — every tenant's *queue* rows, by entering the NOLOGIN
  sweeper role. Used only by the delivery claim, its settle-up, and the
  queue's health counts; the sweeper role has privileges on ``scheduled_sends``
  alone, so a careless read of anything else under it fails loudly.
* :func:`support_scope` — the staff admin's cross-tenant view, by entering
  the NOLOGIN support role; used only by the admin site for staff users.
* :func:`planning_scope` — a *named* set of users' rows, by entering the
  NOLOGIN planner role with those ids set for the transaction: materialize
  plans and queues a slice of users in one statement per step instead of a
  transaction per user. The planner role may read what planning reads and
  write only the queue and the capped count; its policies admit exactly the
  listed users (docs/ARCHITECTURE.md, "Planning in sets").

``tenant_read``, ``tenant_statements`` and ``unscoped_relaxed`` give the same
guarantees to one short transaction in one round trip (the setting travels
with the statements, which PostgreSQL runs as one implicit transaction); inside
a transaction they fall back to the context managers.

They refuse to nest and refuse to run inside a transaction they do not own:
a ``SET LOCAL`` made inside a savepoint survives the savepoint's release, so
a scope opened inside someone else's transaction would outlive its block. For
the same reason they refuse a connection with autocommit off, where the
transaction they would run in is an implicit one that nobody has committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, Error, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

TENANT_SETTING = "app.current_user_id"
PLANNING_SETTING = "app.planning_user_ids"
_ACTIVE_FLAG = "_nudge_scope"
# PostgreSQL bigint; anything larger cannot be a user id.
_MAX_USER_ID = 2**63 - 1


class ScopeError(RuntimeError):
    """A scope was used in a way that could leak or widen tenant access."""


def _validated_user_id(user_id: object) -> int:
    if isinstance(user_id, bool) or not isinstance(user_id, int):
        raise ScopeError(f"tenant_scope needs an integer user id, got {type(user_id).__name__}")
    if not 0 < user_id <= _MAX_USER_ID:
        raise ScopeError(f"tenant_scope needs a positive bigint user id, got {user_id}")
    return user_id


# One statement sets both transaction-local settings: the tenant, and the
# role (``set_config('role', …)`` is ``SET LOCAL ROLE``, with the same
# membership check). Bound parameters, so no value is ever spliced into SQL.
_SET_SCOPE = (
    "SELECT set_config(%s, %s, true), set_config('role', %s, true), "
    f"set_config('{PLANNING_SETTING}', %s, true)"
)
# The same, for work whose commit need not wait for the disk (see tenant_scope).
_SET_SCOPE_RELAXED = _SET_SCOPE + ", set_config('synchronous_commit', 'off', true)"
# The same, for a transaction that may only read (see tenant_reads).
_SET_SCOPE_READ_ONLY = _SET_SCOPE + ", set_config('transaction_read_only', 'on', true)"
# Prefixed to a read in the same round trip: the read is a separate statement,
# so the policy's InitPlan sees the new tenant when it starts.
_SWITCH_TENANT = "SELECT set_config(%(_scope_setting)s, %(_scope_tenant)s, true); "


@contextmanager
def _owned_transaction(
    kind: str,
    using: str,
    *,
    tenant: str,
    role: str,
    relaxed_commit: bool = False,
    read_only: bool = False,
    planning: str = "",
) -> Iterator[None]:
    connection = connections[using]
    active = getattr(connection, _ACTIVE_FLAG, None)
    if active:
        raise ScopeError(f"{kind} cannot be opened inside {active}; scopes do not nest")
    if not connection.in_atomic_block and not connection.get_autocommit():
        # With autocommit off, atomic() neither begins nor commits: the block's
        # SET LOCAL would live on until someone else's commit, past the scope.
        raise ScopeError(f"{kind} needs autocommit on; it would outlive its block otherwise")
    # Django's test wrapper (an outer atomic block marked _from_testcase) is
    # the only transaction a scope may run inside; durable=True enforces the
    # same rule a second time.
    inside_test_wrapper = connection.in_atomic_block
    if inside_test_wrapper and not all(
        getattr(block, "_from_testcase", False) for block in connection.atomic_blocks
    ):
        raise ScopeError(f"{kind} must own its transaction; it was opened inside another one")
    with transaction.atomic(using=using, durable=True):
        setattr(connection, _ACTIVE_FLAG, kind)
        try:
            with connection.cursor() as cursor:
                enter = _SET_SCOPE
                if relaxed_commit:
                    enter = _SET_SCOPE_RELAXED
                elif read_only:
                    enter = _SET_SCOPE_READ_ONLY
                cursor.execute(enter, [TENANT_SETTING, tenant, role, planning])
                yield
                if read_only:
                    # Nothing to keep: ending in a rollback also undoes every
                    # setting when the block is a test wrapper's savepoint.
                    transaction.set_rollback(True, using=using)
                # Our own transaction's commit or rollback reverts SET LOCAL. Under
                # a test's wrapping transaction the block is a savepoint, whose
                # release would keep it alive: reset explicitly there (a doomed
                # transaction is rolled back anyway).
                elif inside_test_wrapper and not connection.needs_rollback:
                    cursor.execute(_SET_SCOPE, [TENANT_SETTING, "", "none", ""])
        finally:
            setattr(connection, _ACTIVE_FLAG, None)


@contextmanager
def tenant_scope(
    user_id: int, *, using: str = DEFAULT_DB_ALIAS, relaxed_commit: bool = False
) -> Iterator[None]:
    """Run the block in a transaction that sees only ``user_id``'s rows.

    ``relaxed_commit`` lets the commit return before it reaches the disk
    (``synchronous_commit = off`` for this transaction only): for work that
    the next run derives again anyway, where a server crash losing the last
    fraction of a second of it costs one run's delay. Never for delivery.
    """
    user_id = _validated_user_id(user_id)
    with _owned_transaction(
        f"tenant_scope({user_id})",
        using,
        tenant=str(user_id),
        role="none",
        relaxed_commit=relaxed_commit,
    ):
        yield


@contextmanager
def tenant_reads(
    *, using: str = DEFAULT_DB_ALIAS
) -> Iterator[Callable[[int, str, dict[str, object]], tuple | None]]:
    """One read-only transaction that reads several tenants' rows, one tenant at a time.

    Yields ``read(user_id, statement, params)``: it runs ``statement`` (named
    parameters) seeing only that user's rows, exactly as inside
    ``tenant_scope(user_id)``, and answers its first row. Entering the user's
    scope travels with the statement, so a read costs one round trip, not a
    transaction. The transaction is READ ONLY and ends in a rollback: nothing
    can be written in it, whichever tenant is current. For delivery, which
    reads a little about many users in a row.
    """
    with _owned_transaction("tenant_reads()", using, tenant="", role="none", read_only=True):
        connection = connections[using]

        def read(user_id: int, statement: str, params: dict[str, object]) -> tuple | None:
            tenant = {
                "_scope_setting": TENANT_SETTING,
                "_scope_tenant": str(_validated_user_id(user_id)),
            }
            with connection.cursor() as cursor:
                cursor.execute(_SWITCH_TENANT + statement, {**params, **tenant})
                cursor.nextset()
                return cursor.fetchone()

        yield read


@contextmanager
def _own_transaction_cursor(connection: BaseDatabaseWrapper) -> Iterator[CursorWrapper]:
    """A cursor for statements that are their own implicit transaction. A connection
    the server dropped is closed on the way out, so the next use reconnects — as a
    scope's failed rollback does — instead of failing until the process ends."""
    try:
        with connection.cursor() as cursor:
            yield cursor
    except Error:
        if not connection.is_usable():
            connection.close()
        raise


# Prefixed to statements in the same round trip (``tenant_read``,
# ``tenant_statements``): the tenant and no role, as ``tenant_scope`` sets them;
# a read may only read; a relaxed write commits without waiting for the disk.
_ENTER_TENANT = (
    "SELECT set_config(%(_scope_setting)s, %(_scope_tenant)s, true), "
    "set_config('role', 'none', true)"
)
_ENTER_TENANT_READ = _ENTER_TENANT + ", set_config('transaction_read_only', 'on', true)"
_ENTER_TENANT_RELAXED = _ENTER_TENANT + ", set_config('synchronous_commit', 'off', true)"


def tenant_read(
    user_id: int, statement: str, params: dict[str, object], *, using: str = DEFAULT_DB_ALIAS
) -> list[tuple]:
    """``statement`` (named parameters) seeing only ``user_id``'s rows, in one round trip;
    answers its rows.

    Outside any transaction the tenant travels with the statement as one
    implicit, read-only transaction, exactly as ``tenant_scope`` would set it
    (transaction-local, gone at its end): for the sync pool's lanes, which read
    one user's connections after another, four round trips became one. Inside a
    transaction it runs in ``tenant_scope``, with that scope's rules.
    """
    user_id = _validated_user_id(user_id)
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        with tenant_scope(user_id, using=using), connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall()
    tenant = {"_scope_setting": TENANT_SETTING, "_scope_tenant": str(user_id)}
    with _own_transaction_cursor(connection) as cursor:
        cursor.execute(f"{_ENTER_TENANT_READ}; {statement}", {**params, **tenant})
        cursor.nextset()
        return cursor.fetchall()


def tenant_statements(
    user_id: int,
    statements: Sequence[str],
    params: dict[str, object],
    *,
    relaxed_commit: bool = False,
    using: str = DEFAULT_DB_ALIAS,
) -> list[list[tuple]]:
    """``statements`` (sharing named ``params``) seeing only ``user_id``'s rows, as one
    transaction; answers each statement's rows, in order.

    Outside any transaction they travel with the tenant setting in one round
    trip, which PostgreSQL runs as one implicit transaction: all of it or none
    of it, the setting gone at its end — ``tenant_scope``'s guarantees, for the
    sync pool's writes, one per connection. Inside a transaction it runs in
    ``tenant_scope``, one statement after another.
    """
    user_id = _validated_user_id(user_id)
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        with (
            tenant_scope(user_id, relaxed_commit=relaxed_commit, using=using),
            connection.cursor() as cursor,
        ):
            return run_statements(cursor, statements, params)
    enter = _ENTER_TENANT_RELAXED if relaxed_commit else _ENTER_TENANT
    tenant = {"_scope_setting": TENANT_SETTING, "_scope_tenant": str(user_id)}
    with _own_transaction_cursor(connection) as cursor:
        cursor.execute("; ".join([enter, *statements]), {**params, **tenant})
        answers = []
        for _statement in statements:
            cursor.nextset()
            answers.append(cursor.fetchall() if cursor.description else [])
        return answers


def run_statements(
    cursor: CursorWrapper, statements: Sequence[str], params: dict[str, object]
) -> list[list[tuple]]:
    """Each statement in turn on ``cursor`` (in a scope already open); their rows."""
    answers = []
    for statement in statements:
        cursor.execute(statement, params)
        answers.append(cursor.fetchall() if cursor.description else [])
    return answers


# Prefixed to one statement in the same round trip (client-side binding sends
# both as one simple query, which PostgreSQL runs as one implicit transaction).
_RELAXED_COMMIT_PREFIX = (
    f"SELECT set_config('{TENANT_SETTING}', '', true), set_config('role', 'none', true), "
    "set_config('synchronous_commit', 'off', true); "
)


def unscoped_relaxed(
    statement: str, params: dict[str, object], *, using: str = DEFAULT_DB_ALIAS
) -> list[tuple]:
    """One statement that sees no tenant's rows, as a transaction of its own that
    commits without waiting for the disk; answers its rows (none if it has none).

    Outside any transaction (the pacer's threads, a sweep between its scopes)
    the statement travels with its setting in one round trip and is its own
    transaction: a row it locks — a budget every process reserves from — is
    held only while the server runs it, never across a round trip to a busy
    client whose thread waits for the GIL. Inside a transaction it runs in
    ``unscoped_relaxed_commit``, with that scope's rules (only a test's
    wrapping transaction is allowed).
    """
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        with unscoped_relaxed_commit(using=using), connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []
    with _own_transaction_cursor(connection) as cursor:
        cursor.execute(_RELAXED_COMMIT_PREFIX + statement, params)
        cursor.nextset()
        return cursor.fetchall() if cursor.description else []


@contextmanager
def unscoped_relaxed_commit(*, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """A transaction that sees no tenant's rows and commits without waiting for the disk.

    For bookkeeping outside tenant data whose loss in a server crash is
    harmless (the shared send budget), where waiting for the WAL flush would
    be the slowest part.
    """
    with _owned_transaction(
        "unscoped_relaxed_commit()", using, tenant="", role="none", relaxed_commit=True
    ):
        yield


@contextmanager
def rls_bypass(*, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block as the sweeper role: every tenant's queue rows, nothing else.

    Only the claim, the settle-up and their bookkeeping belong here.
    """
    with _owned_transaction("rls_bypass()", using, tenant="", role=settings.NUDGE_DB_SWEEPER_ROLE):
        yield


@contextmanager
def planning_scope(user_ids: Sequence[int], *, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block as the planner role, seeing the rows of ``user_ids`` and no one else's.

    For materialize alone: one slice of users planned and queued a statement
    per step. The ids travel as a transaction-local setting the planner's
    policies read; the commit, as in ``tenant_scope(relaxed_commit=True)``,
    need not wait for the disk (the next run derives it all again).
    """
    ids = sorted({_validated_user_id(user_id) for user_id in user_ids})
    if not ids:
        raise ScopeError("planning_scope needs at least one user id")
    with _owned_transaction(
        f"planning_scope({len(ids)} users)",
        using,
        tenant="",
        role=settings.NUDGE_DB_PLANNER_ROLE,
        relaxed_commit=True,
        planning=",".join(map(str, ids)),
    ):
        yield


# The name ``current_scope()`` gives the admin's support scope while it is open.
SUPPORT_SCOPE = "support_scope()"


@contextmanager
def support_scope(*, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Run the block as the support role: the staff admin's cross-tenant view."""
    with _owned_transaction(SUPPORT_SCOPE, using, tenant="", role=settings.NUDGE_DB_SUPPORT_ROLE):
        yield


def current_scope(*, using: str = DEFAULT_DB_ALIAS) -> str | None:
    """Which scope the connection is in, for assertions and error messages."""
    return getattr(connections[using], _ACTIVE_FLAG, None)
