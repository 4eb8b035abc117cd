"""Self-service delivery settings: a readable pause, quiet hours, an unreachable
channel, and the WhatsApp opt-in instant (issue 12)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0009_delivery_caps"),
    ]

    operations = [
        migrations.AddField(
            model_name="deliverysettings",
            name="paused",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="paused_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="paused_reason",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="quiet_end",
            field=models.TimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="quiet_start",
            field=models.TimeField(
                blank=True, help_text="Local time; none = no quiet hours.", null=True
            ),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="unreachable_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="unreachable_channel",
            field=models.CharField(
                blank=True,
                choices=[
                    ("whatsapp", "WhatsApp"),
                    ("telegram", "Telegram"),
                    ("console", "Console (development)"),
                ],
                default="",
                help_text="The provider said this user cannot be reached here; cleared by relinking.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="unreachable_reason",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="whatsapp_opted_in_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
