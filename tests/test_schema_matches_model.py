"""The model says what the database has: every ``Meta.indexes`` entry is the real index.

Some of the queue's indexes were made in SQL before the model could name them
(``fire_minute`` is generated); the model now declares them, in a state-only
migration. If the two drifted, a reader of ``models.py`` — or ``makemigrations``
— would be told about an index that is not the one the plans stand on.
"""

from __future__ import annotations

from django.apps import apps
from django.db import connection


def _definition(index_name: str) -> str | None:
    """The index's definition from ``USING`` on: the part that does not name it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef(c.oid) FROM pg_class c "
            "WHERE c.relname = %s AND c.relkind IN ('i', 'I') AND pg_table_is_visible(c.oid)",
            [index_name],
        )
        row = cursor.fetchone()
    return row[0].split(" USING ", 1)[1] if row else None


def test_every_declared_index_is_the_database_index(db):
    checked = 0
    for model in apps.get_models():
        if not model._meta.indexes or model._meta.app_label not in {
            "scheduled_sends",
            "calendars",
            "portal",
        }:
            continue
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE TEMPORARY TABLE "scratch_{table}" (LIKE "{table}")')
        with connection.schema_editor(atomic=False) as editor:
            for index in model._meta.indexes:
                sql = str(index.create_sql(model, editor))
                sql = sql.replace(f'"{table}"', f'"scratch_{table}"').replace(
                    f'"{index.name}"', f'"scratch_{index.name}"'
                )
                with connection.cursor() as cursor:
                    cursor.execute(sql)
                assert _definition(index.name) == _definition(f"scratch_{index.name}"), (
                    model.__name__,
                    index.name,
                )
                checked += 1
    assert checked >= 5
