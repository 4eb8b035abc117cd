"""Workload 8: what row-level security costs the claim.

The same ``CLAIM_DUE`` text, side by side, interleaved, each rolled back:
on ``scheduled_sends`` under ``rls_bypass()`` (FORCE RLS, the sweeper's
policy), and on ``scheduled_sends_norls`` — ``CREATE TABLE … (LIKE
scheduled_sends INCLUDING ALL)``, same rows, same indexes, no RLS — as the
login role with no scope. Runs on the largest idle-minute queue plus a due
backlog.
"""

from __future__ import annotations

from datetime import timedelta

from bench import data, env

COPY = "scheduled_sends_norls"


def run(sizes, users: list[int]) -> dict:
    with env.stage(f"RLS overhead: {sizes.rls_due:,} due rows added, copy without RLS"):
        at = env.now()
        if not env.sql("SELECT count(*) FROM pg_class WHERE relname = 'scheduled_sends'")[0][0]:
            raise RuntimeError("scheduled_sends is missing")
        total = _rows()
        if total < sizes.rls_due:  # run alone (--only rls): bring a queue of its own
            with data.rebuilt_indexes("scheduled_sends"):
                data.queue_synthetic(
                    users,
                    sizes.idle_rows,
                    start=at + timedelta(minutes=5),
                    span=timedelta(hours=3),
                )
        data.queue_synthetic(
            users,
            sizes.rls_due,
            start=at - timedelta(minutes=10),
            span=timedelta(minutes=9),
            first_ref=10_000_000,
        )
        env.owner_sql(f"DROP TABLE IF EXISTS {COPY}")
        env.owner_sql(f"CREATE TABLE {COPY} (LIKE scheduled_sends INCLUDING ALL)")
        env.owner_sql(f"ALTER TABLE {COPY} SET (fillfactor = 80)")
        from django.db import connection

        from scheduled_sends.models import ScheduledSend
        from tenancy.scope import support_scope

        with data.rebuilt_indexes(COPY), support_scope(), connection.cursor() as cursor:
            # fire_minute is generated, in both tables.
            columns = ", ".join(
                f.column for f in ScheduledSend._meta.concrete_fields if not f.generated
            )
            cursor.execute(f"INSERT INTO {COPY} ({columns}) SELECT {columns} FROM scheduled_sends")
        env.vacuum("scheduled_sends")
        env.vacuum(COPY)
        rls_active = env.sql(
            "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = %s",
            ["scheduled_sends"],
        )[0][0]
        copy_rls = env.sql(
            "SELECT relrowsecurity OR relforcerowsecurity FROM pg_class WHERE relname = %s",
            [COPY],
        )[0][0]
        results = {"rows": _rows(), "due": sizes.rls_due, "reps": sizes.reps * 2}
        results["rls_forced_on_queue"] = rls_active
        results["rls_on_copy"] = copy_rls
        for case, limit_at in (("idle", at - timedelta(hours=1)), ("batch", at)):
            with_rls, plain = [], []
            env.explain_claim(limit_at)  # warm both
            env.explain_claim(limit_at, table=COPY)
            for _ in range(sizes.reps * 2):
                with_rls.append(env.explain_claim(limit_at)["db_ms"])
                plain.append(env.explain_claim(limit_at, table=COPY)["db_ms"])
            results[case] = {
                "rls": with_rls,
                "plain": plain,
                "ratio": env.median(with_rls) / env.median(plain),
                "rows_claimed": env.explain_claim(limit_at)["rows"],
            }
        env.owner_sql(f"DROP TABLE {COPY}")
    return results


def _rows() -> int:
    from django.db import connection

    from tenancy.scope import support_scope

    with support_scope(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM scheduled_sends")
        return cursor.fetchone()[0]
