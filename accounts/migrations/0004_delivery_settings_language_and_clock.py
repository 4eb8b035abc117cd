"""Each person's language and clock (issue 22): existing rows read English and 24 hours;
the user area sets a new row's from the browser's Accept-Language."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_whatsapp_and_materialize_wording"),
    ]

    operations = [
        migrations.AddField(
            model_name="deliverysettings",
            name="clock",
            field=models.CharField(
                choices=[("24h", "24-hour (15:00)"), ("12h", "12-hour (3:00 PM)")],
                default="24h",
                max_length=3,
            ),
        ),
        migrations.AddField(
            model_name="deliverysettings",
            name="language",
            field=models.CharField(
                choices=[
                    ("en", "English"),
                    ("de", "Deutsch"),
                    ("es", "Español"),
                    ("fr", "Français"),
                    ("pt-br", "Português (Brasil)"),
                ],
                default="en",
                max_length=8,
            ),
        ),
    ]
