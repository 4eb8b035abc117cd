"""A channel being made is recorded before the provider is asked, so a notification
arriving before the provider's answer is stored is not refused."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0014_caldav_provider"),
    ]

    operations = [
        migrations.AddField(
            model_name="calendarconnection",
            name="push_pending_channel_id",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="calendarconnection",
            name="push_pending_digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
    ]
