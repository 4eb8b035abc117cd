"""The queue's two indexes, its storage settings, and row-level security.

* ``scheduled_sends_nudge_uniq``: materializing the same window twice, or two
  runs at once, queues one nudge (``INSERT … ON CONFLICT DO NOTHING``). It
  also serves every tenant-scoped read, which all lead with ``user_id``.
* ``scheduled_sends_due_idx``: the claim's index — ``fire_at`` over live rows
  only, so its size follows the pending work, not the table's history. A
  failed or expired row is never sent, so it leaves the index like a sent one.
* ``claimed_at`` is in no index, so stamping a claim can be a heap-only update;
  fillfactor leaves room on each page for that.
"""

from django.db import migrations

from tenancy.rls import enable_tenant_rls, grant_sweeper


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0001_initial"),
        ("tenancy", "0001_support_role_grants"),
    ]

    operations = [
        migrations.RunSQL(
            sql="CREATE UNIQUE INDEX scheduled_sends_nudge_uniq "
            "ON scheduled_sends (user_id, kind, ref_id, fire_at)",
            reverse_sql="DROP INDEX scheduled_sends_nudge_uniq",
        ),
        migrations.RunSQL(
            sql="CREATE INDEX scheduled_sends_due_idx ON scheduled_sends (fire_at) "
            "WHERE sent_at IS NULL AND outcome IS NULL",
            reverse_sql="DROP INDEX scheduled_sends_due_idx",
        ),
        migrations.RunSQL(
            sql="ALTER TABLE scheduled_sends SET (fillfactor = 80, "
            "autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02, "
            "autovacuum_vacuum_insert_scale_factor = 0.05)",
            reverse_sql="ALTER TABLE scheduled_sends RESET (fillfactor, "
            "autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor, "
            "autovacuum_vacuum_insert_scale_factor)",
        ),
        enable_tenant_rls("scheduled_sends"),
        grant_sweeper("scheduled_sends"),
        enable_tenant_rls("delivery_settings"),
    ]
