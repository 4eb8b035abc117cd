"""The lead's range is one validator (the model's), with the message support and users read."""

from django.db import migrations, models

import scheduled_sends.models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0012_queue_indexes_on_the_model"),
    ]

    operations = [
        migrations.AlterField(
            model_name="deliverysettings",
            name="default_lead_minutes",
            field=models.PositiveIntegerField(
                default=scheduled_sends.models.default_lead_minutes,
                validators=[scheduled_sends.models.validate_lead_minutes],
            ),
        ),
    ]
