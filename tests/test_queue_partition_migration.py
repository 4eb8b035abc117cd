"""An existing deployment's queue becomes partitioned with no rewrite and no index
build: the table and its indexes keep their files (issue 25, item 3)."""

from __future__ import annotations

from datetime import timedelta

from django.core.management import call_command
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue.partitions import partitions
from scheduled_sends.queue.transitions import database_now
from tenancy.scope import support_scope
from tests.support.queue import queue_nudge

_FILES = """
SELECT c.relname, c.relfilenode FROM pg_class c
 WHERE c.oid = %(table)s::regclass
    OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %(table)s::regclass)
"""


def _files(table: str) -> dict[int, str]:
    """Each relation's data file by number (a rewrite or rebuild makes a new one)."""
    with connection.cursor() as cursor:
        cursor.execute(_FILES, {"table": table})
        return {filenode: name for name, filenode in cursor.fetchall()}


def _before_the_partitioning() -> str:
    """The queue's last migration before partitioning (numbers change on merges)."""
    loader = MigrationLoader(connection)
    (groundwork,) = [
        key
        for key in loader.disk_migrations
        if key[0] == "scheduled_sends" and key[1].endswith("_queue_partition_groundwork")
    ]
    dependencies = loader.disk_migrations[groundwork].dependencies
    (before,) = [name for app, name in dependencies if app == "scheduled_sends"]
    return before


def _relkind(table: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])
        return cursor.fetchone()[0]


def test_an_existing_queue_is_attached_whole_as_the_first_partition(transactional_db, make_user):
    """Issue 25, item 3: the documented path for an existing table — the groundwork
    migration validates a bound and builds the new key's index concurrently, the next
    only changes the catalog:
    every row stays where it was, ids go on, and later days land in day partitions."""
    call_command("migrate", "scheduled_sends", _before_the_partitioning(), verbosity=0)
    try:
        assert _relkind("scheduled_sends") == "r"
        user = make_user()
        now = database_now()
        ids = {
            queue_nudge(user.pk, ref_id=n, at=at, subject_starts_at=at + timedelta(minutes=10)).pk
            for n, at in enumerate([now - timedelta(days=40), now, now + timedelta(hours=20)])
        }
        files = _files("scheduled_sends")
        assert len(files) == 7  # the table, its primary key, the unique key, four more indexes
    finally:
        call_command("migrate", "scheduled_sends", verbosity=0)

    assert _relkind("scheduled_sends") == "p"
    moved = _files("scheduled_sends_before")
    # The same table file and the same index files, renamed; the primary key on
    # (id) alone gave way to the groundwork's (id, intended_at), built concurrently.
    kept = {filenode for filenode, name in files.items() if name != "scheduled_sends_pkey"}
    assert kept < set(moved) and len(moved) == len(files)
    first, *days = partitions()
    assert first.name == "scheduled_sends_before" and first.start is None
    assert first.end > now + timedelta(hours=27)
    assert len(days) >= 10
    with support_scope():
        assert set(ScheduledSend.objects.values_list("pk", flat=True)) == ids
    later = first.end + timedelta(hours=9)
    new = queue_nudge(user.pk, ref_id=99, at=later, subject_starts_at=later + timedelta(hours=1))
    assert new.pk > max(ids)
    with connection.cursor() as cursor, support_scope():
        cursor.execute(
            "SELECT tableoid::regclass::text FROM scheduled_sends WHERE id = %s", [new.pk]
        )
        assert cursor.fetchone()[0] == days[0].name  # regclass reads back as its name
