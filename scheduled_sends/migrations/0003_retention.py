"""Retention: let the sweeper role prune settled rows, in fire_at order.

``prune_sends`` deletes settled rows older than a cut-off in batches; the
partial index keeps each batch an index range scan instead of a table scan.
"""

from django.conf import settings
from django.db import migrations

SWEEPER = '"' + settings.NUDGE_DB_SWEEPER_ROLE.replace('"', '""') + '"'


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0002_queue_indexes_and_rls")]

    operations = [
        migrations.RunSQL(
            sql="CREATE INDEX scheduled_sends_settled_idx ON scheduled_sends (fire_at) "
            "WHERE outcome IS NOT NULL",
            reverse_sql="DROP INDEX scheduled_sends_settled_idx",
        ),
        migrations.RunSQL(
            sql="CREATE INDEX scheduled_sends_provider_message_idx "
            "ON scheduled_sends (provider_message_id) WHERE provider_message_id <> ''",
            reverse_sql="DROP INDEX scheduled_sends_provider_message_idx",
        ),
        migrations.RunSQL(
            sql=f"GRANT DELETE ON scheduled_sends TO {SWEEPER}",
            reverse_sql=f"REVOKE DELETE ON scheduled_sends FROM {SWEEPER}",
        ),
    ]
