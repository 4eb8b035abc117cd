"""The API's rate is counted per account, not per token (issue 34): a table of one row
per user (under row-level security) replaces the counters on each token's row."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from tenancy.rls import enable_tenant_rls


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("portal", "0006_linking_moved_to_messaging"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiRate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("window_at", models.DateTimeField()),
                ("requests", models.PositiveIntegerField()),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"db_table": "portal_api_rates"},
        ),
        enable_tenant_rls("portal_api_rates"),
        migrations.RemoveField(model_name="apitoken", name="rate_requests"),
        migrations.RemoveField(model_name="apitoken", name="rate_window_at"),
    ]
