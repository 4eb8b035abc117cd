"""DeliverySettings now belongs to accounts (its 0001): state only, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0013_lead_validated_once"),
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="DeliverySettings")],
            database_operations=[],
        ),
    ]
