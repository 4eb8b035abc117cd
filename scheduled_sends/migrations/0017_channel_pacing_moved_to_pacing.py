"""ChannelPacing now belongs to the pacing app (its 0001): state only, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0016_adaptive_pacing_budgets"),
        ("pacing", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ChannelPacing")],
            database_operations=[],
        ),
    ]
