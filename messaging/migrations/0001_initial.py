"""Link codes, opt-ins, the address directory and the inbound replay guards move here
from portal: state only, the tables (``portal_*``) keep their names, rows, policies and
grants; portal 0006 drops them from that app's state.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("portal", "0005_account_notices_twilio_seen_api_rate"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TelegramUpdateSeen",
                    fields=[
                        ("update_id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("received_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "portal_telegram_updates_seen",
                    },
                ),
                migrations.CreateModel(
                    name="TwilioMessageSeen",
                    fields=[
                        (
                            "message_sid",
                            models.CharField(max_length=64, primary_key=True, serialize=False),
                        ),
                        ("received_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        "db_table": "portal_twilio_messages_seen",
                        "indexes": [
                            models.Index(fields=["received_at"], name="portal_twilio_seen_at_idx")
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="ChannelAddress",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "channel",
                            models.CharField(
                                choices=[
                                    ("whatsapp", "WhatsApp"),
                                    ("telegram", "Telegram"),
                                    ("console", "Console (development)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("address_digest", models.CharField(max_length=64)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "portal_channel_addresses",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("channel", "address_digest"),
                                name="portal_channel_addresses_uniq",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="LinkCode",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "channel",
                            models.CharField(
                                choices=[
                                    ("whatsapp", "WhatsApp"),
                                    ("telegram", "Telegram"),
                                    ("console", "Console (development)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("secret_digest", models.CharField(max_length=64)),
                        ("address", models.CharField(blank=True, default="", max_length=64)),
                        ("expires_at", models.DateTimeField()),
                        ("used_at", models.DateTimeField(blank=True, null=True)),
                        ("attempts", models.PositiveSmallIntegerField(default=0)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
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
                        "db_table": "portal_link_codes",
                        "indexes": [
                            models.Index(
                                fields=["user", "channel"], name="portal_link_codes_user_idx"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="OptInRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "channel",
                            models.CharField(
                                choices=[
                                    ("whatsapp", "WhatsApp"),
                                    ("telegram", "Telegram"),
                                    ("console", "Console (development)"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("address", models.CharField(max_length=64)),
                        ("method", models.CharField(max_length=120)),
                        ("recorded_at", models.DateTimeField()),
                        ("withdrawn_at", models.DateTimeField(blank=True, null=True)),
                        ("withdrawn_how", models.CharField(blank=True, default="", max_length=120)),
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
                        "db_table": "portal_opt_ins",
                        "indexes": [
                            models.Index(fields=["user", "channel"], name="portal_opt_ins_user_idx")
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
