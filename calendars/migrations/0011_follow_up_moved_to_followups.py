"""FollowUp now belongs to the followups app (its 0001): state only, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0010_push_work_takes"),
        ("followups", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="FollowUp")],
            database_operations=[],
        ),
    ]
