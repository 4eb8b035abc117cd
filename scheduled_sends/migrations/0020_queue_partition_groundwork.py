"""Groundwork for partitioning the queue by day, done without a long lock (issue 25).

Migration 0021 turns ``scheduled_sends`` into a table partitioned by the UTC
day of ``intended_at`` and attaches the existing table, rows and all, as its
first partition: everything intended before a bound a few days ahead. For
that attach to be a catalog change, the existing table must already prove
it fits (a validated CHECK on the bound) and already carry the new primary
key's index ``(id, intended_at)``. Both are made here, each in its own
transaction (``atomic = False``), in the ways that never block the queue:

* the CHECK is added ``NOT VALID`` (a brief exclusive lock, no scan), then
  ``VALIDATE``\\ d, which scans under a lock that lets reads and writes go on;
* the index is built ``CONCURRENTLY``.

The bound is midnight UTC three days after the migration runs: past every
instant materialize can queue (look-ahead plus the longest lead, at most 27
hours), so no insert between this migration and the next can break it. New
days go to day partitions from that bound on.
"""

from django.db import migrations

BOUND = "scheduled_sends_before_bound"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("scheduled_sends", "0019_materialize_cycles_and_slices")]

    operations = [
        migrations.RunSQL(
            sql=[
                f"""
DO $$
BEGIN
    EXECUTE format(
        'ALTER TABLE scheduled_sends ADD CONSTRAINT {BOUND} CHECK (intended_at < %L) NOT VALID',
        (date_trunc('day', statement_timestamp() AT TIME ZONE 'UTC') + interval '3 days')
            AT TIME ZONE 'UTC');
END
$$"""
            ],
            reverse_sql=f"ALTER TABLE scheduled_sends DROP CONSTRAINT IF EXISTS {BOUND}",
        ),
        migrations.RunSQL(
            sql=f"ALTER TABLE scheduled_sends VALIDATE CONSTRAINT {BOUND}",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            sql="CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS scheduled_sends_before_pkey "
            "ON scheduled_sends (id, intended_at)",
            reverse_sql="DROP INDEX CONCURRENTLY IF EXISTS scheduled_sends_before_pkey",
        ),
    ]
