"""Leave half of each heap page free, so a claim can be a heap-only update.

A claim stamps ``claimed_at`` on up to a batch of rows with neighbouring
``fire_at`` values, which sit on the same pages: at fillfactor 80 only about a
quarter of those updates found room on their page (measured in BENCHMARKS.md,
section 7), at 50 most did. A heap-only update writes no index entries, which
keeps the partial index and the unique index from bloating under claims.
Retention (``prune_sends``) bounds the extra heap this costs. It applies to
pages written from now on.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0004_sweep_runs_index_as_of")]

    operations = [
        migrations.RunSQL(
            sql="ALTER TABLE scheduled_sends SET (fillfactor = 50)",
            reverse_sql="ALTER TABLE scheduled_sends SET (fillfactor = 80)",
        ),
    ]
