"""The minute job's takes of push changes get columns of their own.

``taken_change_at`` holds the mark a job is fetching for and
``change_held_until`` until when (the database's clock), so a notification
during the fetch lands in ``changed_at`` again and a killed job's takes come
back when their hold runs out. Nullable columns: a catalog change; the index
is built on a table of one row per pushed calendar.
"""

from django.db import migrations, models
from django.db.models.functions import Least


class Migration(migrations.Migration):
    dependencies = [("calendars", "0009_push_reauthorize_expiry")]

    operations = [
        migrations.AddField(
            model_name="pushwork",
            name="change_held_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="pushwork",
            name="taken_change_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="pushwork",
            index=models.Index(
                Least("changed_at", "taken_change_at"),
                condition=models.Q(changed_at__isnull=False)
                | models.Q(taken_change_at__isnull=False),
                name="push_work_change_order_idx",
            ),
        ),
    ]
