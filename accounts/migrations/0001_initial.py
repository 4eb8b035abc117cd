"""DeliverySettings moves here from scheduled_sends: state only, the table stays.

``delivery_settings`` keeps its name, rows, policies and grants; only Django's
idea of which app owns the model changes (``SeparateDatabaseAndState``), with
scheduled_sends 0014 dropping it from that app's state. The content type is
relabelled so staff permissions and admin history follow the model.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import accounts.models


def _relabel(apps, schema_editor, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label=old, model="deliverysettings").update(app_label=new)


def forwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "scheduled_sends", "accounts")


def backwards(apps, schema_editor) -> None:
    _relabel(apps, schema_editor, "accounts", "scheduled_sends")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
        ("scheduled_sends", "0013_lead_validated_once"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DeliverySettings",
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
                        ("enabled", models.BooleanField(default=True)),
                        (
                            "channel",
                            models.CharField(
                                choices=[
                                    ("whatsapp", "WhatsApp"),
                                    ("telegram", "Telegram"),
                                    ("console", "Console (development)"),
                                ],
                                default="console",
                                max_length=16,
                            ),
                        ),
                        (
                            "whatsapp_number",
                            models.CharField(
                                blank=True,
                                default="",
                                max_length=16,
                                validators=[accounts.models.validate_e164],
                            ),
                        ),
                        (
                            "telegram_chat_id",
                            models.CharField(
                                blank=True,
                                default="",
                                max_length=64,
                                validators=[accounts.models.validate_telegram_chat_id],
                            ),
                        ),
                        (
                            "timezone",
                            models.CharField(
                                default="UTC",
                                max_length=64,
                                validators=[accounts.models.validate_timezone],
                            ),
                        ),
                        (
                            "default_lead_minutes",
                            models.PositiveIntegerField(
                                default=accounts.models.default_lead_minutes,
                                validators=[accounts.models.validate_lead_minutes],
                            ),
                        ),
                        (
                            "capped_nudges",
                            models.PositiveIntegerField(
                                db_default=0,
                                help_text="Nudges the last materialize run left out: more than the per-user limits allow in one minute or one look-ahead (NUDGE_MAX_NUDGES_PER_USER…).",
                            ),
                        ),
                        (
                            "capped_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="When the per-user limits last left nudges out.",
                                null=True,
                            ),
                        ),
                        ("paused", models.BooleanField(default=False)),
                        ("paused_reason", models.CharField(blank=True, default="", max_length=200)),
                        ("paused_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "quiet_start",
                            models.TimeField(
                                blank=True,
                                help_text="Local time; none = no quiet hours.",
                                null=True,
                            ),
                        ),
                        ("quiet_end", models.TimeField(blank=True, null=True)),
                        (
                            "unreachable_channel",
                            models.CharField(
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
                        (
                            "unreachable_reason",
                            models.CharField(blank=True, default="", max_length=200),
                        ),
                        ("unreachable_at", models.DateTimeField(blank=True, null=True)),
                        ("whatsapp_opted_in_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "user",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="delivery_settings",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "delivery settings",
                        "db_table": "delivery_settings",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("default_lead_minutes__gte", 0),
                                    ("default_lead_minutes__lte", 1440),
                                ),
                                name="delivery_settings_lead_in_range",
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
