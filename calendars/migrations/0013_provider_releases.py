"""What a disconnect leaves at the provider to undo (a tenant table under row-level
security), and the minute job's list of them (ids only)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from tenancy.rls import enable_tenant_rls


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0012_push_work_fetch_requests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ReleaseWork",
            fields=[
                ("connection_id", models.BigIntegerField(primary_key=True, serialize=False)),
                ("user_id", models.BigIntegerField()),
                ("due_at", models.DateTimeField()),
            ],
            options={
                "db_table": "calendar_release_work",
                "indexes": [models.Index(fields=["due_at"], name="release_work_due_idx")],
            },
        ),
        migrations.CreateModel(
            name="ProviderRelease",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("connection_id", models.BigIntegerField(unique=True)),
                (
                    "provider",
                    models.CharField(
                        choices=[
                            ("google", "Google Calendar"),
                            ("microsoft", "Microsoft 365"),
                            ("ics", "ICS feed"),
                            ("local", "Local events (not synced)"),
                        ],
                        max_length=16,
                    ),
                ),
                ("account", models.CharField(blank=True, default="", max_length=255)),
                ("access_token_encrypted", models.TextField(blank=True, default="")),
                ("refresh_token_encrypted", models.TextField(blank=True, default="")),
                ("token_expires_at", models.DateTimeField(blank=True, null=True)),
                ("push_channel_id", models.CharField(blank=True, default="", max_length=255)),
                ("push_resource_id", models.CharField(blank=True, default="", max_length=255)),
                ("requested_at", models.DateTimeField()),
                (
                    "user",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "db_table": "calendar_releases",
                "indexes": [models.Index(fields=["user"], name="calendar_releases_user_idx")],
            },
        ),
        enable_tenant_rls("calendar_releases"),
    ]
