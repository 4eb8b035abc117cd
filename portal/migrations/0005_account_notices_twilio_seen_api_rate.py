"""Notices a user reads on their Settings page (a tenant table, under row-level
security); the inbound Twilio MessageSids already handled (not a tenant table:
sids only, like the Telegram update log); and each API token's request count
for the current minute (the per-token rate limit)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from tenancy.rls import enable_tenant_rls


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0004_password_reset_requests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="rate_requests",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="apitoken",
            name="rate_window_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="TwilioMessageSeen",
            fields=[
                ("message_sid", models.CharField(max_length=64, primary_key=True, serialize=False)),
                ("received_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "db_table": "portal_twilio_messages_seen",
                "indexes": [models.Index(fields=["received_at"], name="portal_twilio_seen_at_idx")],
            },
        ),
        migrations.CreateModel(
            name="AccountNotice",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("text", models.CharField(max_length=300)),
                ("created_at", models.DateTimeField()),
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
                "db_table": "portal_account_notices",
                "indexes": [
                    models.Index(fields=["user", "-created_at"], name="portal_notices_user_idx")
                ],
            },
        ),
        enable_tenant_rls("portal_account_notices"),
    ]
