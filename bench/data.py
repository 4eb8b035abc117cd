"""Bulk data through the project's own tables, roles and policies.

Users are plain ``auth_user`` rows (not a tenant table). Tenant rows are
written set-based — one ``INSERT … SELECT generate_series`` — under
``tenancy.scope.support_scope()``, so they pass the same row-level security
as every other write. Each statement copies one template row made with the
ORM and overrides only the columns that vary, so a column added to a model
later (with its ORM default) needs no change here.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import connection

from bench import env
from tenancy.scope import support_scope


def replicate(
    model,
    template_pk: int,
    *,
    overrides: dict[str, str],
    source: str,
    params: dict,
    where: str = "",
) -> int:
    """Copy a template row once per row of ``source``; rows inserted."""
    table = model._meta.db_table
    columns = [f.column for f in model._meta.concrete_fields if not (f.primary_key or f.generated)]
    select = [overrides.get(column, f"t.{column}") for column in columns]
    condition = f" AND ({where})" if where else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(select)} FROM {table} AS t, {source} "
            f"WHERE t.id = %(template)s{condition}",
            {**params, "template": template_pk},
        )
        return cursor.rowcount


def make_users(count: int, prefix: str) -> list[int]:
    """``count`` users named ``{prefix}{n}``; their ids in order."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    template = User.objects.create_user(username=f"{prefix}template")
    replicate(
        User,
        template.pk,
        overrides={"username": f"'{prefix}' || g", "date_joined": "now()"},
        source="generate_series(1, %(count)s) AS g",
        params={"count": count},
    )
    template.delete()
    return list(
        User.objects.filter(username__startswith=prefix).order_by("pk").values_list("pk", flat=True)
    )


def add_delivery_settings(user_ids: list[int], channel: str = "console") -> None:
    from accounts.models import DeliverySettings

    with support_scope():
        template = DeliverySettings.objects.create(user_id=user_ids[0], channel=channel)
        replicate(
            DeliverySettings,
            template.pk,
            overrides={"user_id": "u"},
            source="unnest(%(ids)s::bigint[]) AS u",
            params={"ids": user_ids[1:]},
        )


def add_subjects(user_ids: list[int], now: datetime, per_user: int) -> None:
    """One connection, ``per_user`` events and ``per_user`` follow-ups a user, over
    the next two days (what a naive per-tenant sweep would look through)."""
    from calendars.models import CalendarConnection, CalendarEvent, Provider
    from followups.models import FollowUp

    params = {"ids": user_ids, "users": len(user_ids), "per_user": per_user, "now": now}
    with support_scope():
        conn = CalendarConnection.objects.create(
            user_id=user_ids[0], provider=Provider.ICS, account="bench"
        )
        replicate(
            CalendarConnection,
            conn.pk,
            overrides={"user_id": "u"},
            source="unnest(%(ids)s::bigint[]) AS u",
            params={"ids": user_ids[1:]},
        )
        event = CalendarEvent.objects.create(
            user_id=user_ids[0],
            connection=conn,
            provider_event_id="bench-template",
            title="Design review",
            starts_at=now,
        )
        replicate(
            CalendarEvent,
            event.pk,
            overrides={
                "user_id": "c.user_id",
                "connection_id": "c.id",
                "provider_event_id": "'bench-' || g",
                "starts_at": "x.at",
                "ends_at": "x.at + interval '30 minutes'",
            },
            source="""generate_series(0, %(users)s * %(per_user)s - 1) AS g
                JOIN calendar_connections AS c
                  ON c.user_id = (%(ids)s::bigint[])[1 + mod(g, %(users)s)],
                LATERAL (SELECT %(now)s::timestamptz + interval '37 minutes'
                                + interval '48 hours' * (g / %(users)s) / %(per_user)s) AS x(at)""",
            params=params,
        )
        event.delete()
        follow_up = FollowUp.objects.create(user_id=user_ids[0], title="Call back", due_at=now)
        replicate(
            FollowUp,
            follow_up.pk,
            overrides={
                "user_id": "(%(ids)s::bigint[])[1 + mod(g, %(users)s)]",
                "due_at": "%(now)s::timestamptz + interval '41 minutes'"
                " + interval '48 hours' * (g / %(users)s) / %(per_user)s",
            },
            source="generate_series(0, %(users)s * %(per_user)s - 1) AS g",
            params=params,
        )
        follow_up.delete()


def add_follow_ups(
    user_ids: list[int], count: int, *, due_at: datetime, tag: str, first_user_gets: int = 0
) -> None:
    """``count`` follow-ups titled ``{tag}{n}``, round-robin over ``user_ids``
    (the first user takes ``first_user_gets`` of them before the round-robin)."""
    from followups.models import FollowUp

    with support_scope():
        template = FollowUp.objects.create(user_id=user_ids[0], title="template", due_at=due_at)
        user_of = (
            "CASE WHEN g <= %(burst)s THEN (%(ids)s::bigint[])[1] "
            "ELSE (%(ids)s::bigint[])[2 + mod(g - %(burst)s - 1, %(users)s - 1)] END"
            if first_user_gets
            else "(%(ids)s::bigint[])[1 + mod(g - 1, %(users)s)]"
        )
        replicate(
            FollowUp,
            template.pk,
            overrides={"user_id": user_of, "title": f"'{tag}' || g"},
            source="generate_series(1, %(count)s) AS g",
            params={
                "ids": user_ids,
                "users": len(user_ids),
                "count": count,
                "burst": first_user_gets,
            },
        )
        template.delete()


def _queue_template(user_id: int, at: datetime):
    from scheduled_sends.models import Kind, ScheduledSend

    return ScheduledSend.objects.create(
        user_id=user_id,
        kind=Kind.FOLLOW_UP,
        ref_id=0,
        intended_at=at - timedelta(days=400),
        fire_at=at - timedelta(days=400),
        subject_starts_at=at - timedelta(days=400),
        sent_at=at - timedelta(days=400),
        outcome="sent",
    )


def queue_synthetic(
    user_ids: list[int],
    count: int,
    *,
    start: datetime,
    span: timedelta,
    first_ref: int = 1,
    settled: bool = False,
) -> int:
    """``count`` queue rows round-robin over ``user_ids``, ``fire_at`` evenly over
    ``[start, start + span)``; ``settled`` rows are sent one minute after firing.
    ``ref_id`` runs from ``first_ref`` (the unique key needs distinct ones)."""
    from scheduled_sends.models import ScheduledSend

    with support_scope():
        template = _queue_template(user_ids[0], start)
        inserted = replicate(
            ScheduledSend,
            template.pk,
            overrides={
                "user_id": "(%(ids)s::bigint[])[1 + mod(g, %(users)s)]",
                "ref_id": "g",
                "intended_at": "x.at",
                "fire_at": "x.at",
                "subject_starts_at": "x.at + interval '10 minutes'",
                "sent_at": "CASE WHEN %(settled)s THEN x.at + interval '1 minute' END",
                "outcome": "CASE WHEN %(settled)s THEN 'sent' END",
                "created_at": "now()",
            },
            source="""generate_series(%(first)s::bigint, %(last)s::bigint) AS g,
                LATERAL (SELECT %(start)s::timestamptz
                                + %(span)s::interval * (g - %(first)s) / %(count)s) AS x(at)""",
            params={
                "ids": user_ids,
                "users": len(user_ids),
                "first": first_ref,
                "last": first_ref + count - 1,
                "count": count,
                "start": start,
                "span": span,
                "settled": settled,
            },
        )
        template.delete()
    return inserted


def queue_follow_ups(tag: str, *, fire_at: datetime, spread: timedelta | None = None) -> int:
    """Queue one due nudge per follow-up titled ``{tag}…`` (what materialize would
    write for it), firing at ``fire_at`` (plus up to ``spread``), in id order."""
    from scheduled_sends.models import ScheduledSend

    with support_scope():
        template = _queue_template(_any_user(tag), fire_at)
        inserted = replicate(
            ScheduledSend,
            template.pk,
            overrides={
                "user_id": "f.user_id",
                "ref_id": "f.id",
                "fire_at": "%(fire_at)s::timestamptz + %(spread)s::interval * mod(f.id, 97) / 97",
                "subject_starts_at": "f.due_at",
                "sent_at": "NULL",
                "outcome": "NULL",
                "created_at": "now()",
            },
            source="(SELECT * FROM follow_ups ORDER BY id) AS f",
            where="f.title LIKE %(pattern)s",
            params={
                "fire_at": fire_at,
                "spread": spread or timedelta(0),
                "pattern": tag + "%",
            },
        )
        template.delete()
    return inserted


def _any_user(tag: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT user_id FROM follow_ups WHERE title LIKE %s LIMIT 1", [tag + "%"])
        return cursor.fetchone()[0]


def truncate_queue() -> None:
    env.owner_sql("TRUNCATE scheduled_sends")


class rebuilt_indexes:
    """Drop a table's secondary indexes for a bulk load and build them again after,
    from their own definitions (``pg_get_indexdef``): the same indexes, built by
    sort rather than grown row by row (tighter; workload 7 shows grown ones)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.definitions: list[tuple[str, str]] = []

    def __enter__(self):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                "JOIN pg_class c ON c.oid = i.indexrelid "
                "WHERE i.indrelid = %s::regclass AND NOT i.indisprimary "
                "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
                [self.table],
            )
            self.definitions = cursor.fetchall()
        for name, _ in self.definitions:
            env.owner_sql(f'DROP INDEX "{name}"')
        return self

    def __exit__(self, *exc) -> None:
        for _, definition in self.definitions:
            # A partitioned table's index reads "ON ONLY": as written it would be built on
            # the parent alone, leaving every partition without it (and the claim on a
            # sequential scan). Without ONLY it is built on each partition too.
            env.owner_sql(definition.replace(" ON ONLY ", " ON ", 1))
