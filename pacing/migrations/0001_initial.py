"""ChannelPacing moves here from scheduled_sends: state only, the table stays.

``channel_pacing`` keeps its name, rows and grants; only Django's idea of which
app owns the model changes, with scheduled_sends 0017 dropping it from that
app's state.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("scheduled_sends", "0016_adaptive_pacing_budgets"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ChannelPacing",
                    fields=[
                        (
                            "budget",
                            models.CharField(max_length=64, primary_key=True, serialize=False),
                        ),
                        (
                            "next_slot_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("ceiling", models.FloatField(null=True)),
                        ("rate", models.FloatField(null=True)),
                        ("rate_since", models.DateTimeField(null=True)),
                    ],
                    options={"db_table": "channel_pacing"},
                ),
            ],
            database_operations=[],
        ),
    ]
