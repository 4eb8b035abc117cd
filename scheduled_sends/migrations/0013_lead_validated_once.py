"""The lead's range is one validator (the model's), with the message support and users read."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0012_queue_indexes_on_the_model"),
    ]

    operations = [
        migrations.AlterField(
            model_name="deliverysettings",
            name="default_lead_minutes",
            field=models.PositiveIntegerField(
                default=accounts.models.default_lead_minutes,
                validators=[accounts.models.validate_lead_minutes],
            ),
        ),
    ]
