"""Where a Graph ``reauthorizationRequired`` is noted until the renewal answers it.

A nullable column with no default: a catalog change, no table rewrite.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("calendars", "0008_planner_role")]

    operations = [
        migrations.AddField(
            model_name="calendarconnection",
            name="push_reauthorize_expiry",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
