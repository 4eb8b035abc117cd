"""The sweeper may update only the queue's state columns, never who or what a row is for.

Under the bypass the sweeper sees every tenant's queue rows; with a
table-wide UPDATE a bug in a settle-up could re-own a row (``user_id``) or
re-aim it (``kind``, ``ref_id``). Column grants make that a permission error.
"""

from django.db import migrations

from tenancy.rls import restrict_sweeper_updates


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0006_delivery_pipeline")]

    operations = [restrict_sweeper_updates("scheduled_sends")]
