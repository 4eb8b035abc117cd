"""The minute job's to-do list also holds fetches a person's change asked for (an ICS
feed added): ``push_capable`` tells those rows from the push channels' (every row so
far is one), so health counts push fallbacks among calendars that can have push."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0011_follow_up_moved_to_followups"),
    ]

    operations = [
        migrations.AddField(
            model_name="pushwork",
            name="push_capable",
            field=models.BooleanField(default=True),
        ),
    ]
