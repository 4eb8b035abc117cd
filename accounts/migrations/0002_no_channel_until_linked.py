"""A new user has no channel until they link one (the console channel is for
development only); existing rows keep theirs."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="deliverysettings",
            name="channel",
            field=models.CharField(
                blank=True,
                choices=[
                    ("whatsapp", "WhatsApp"),
                    ("telegram", "Telegram"),
                    ("console", "Console (development)"),
                ],
                default="",
                max_length=16,
            ),
        ),
    ]
