"""FollowUp moves here from calendars: state only, the table stays.

``follow_ups`` keeps its name, rows, policies and grants; only Django's idea of
which app owns the model changes, with calendars 0011 dropping it from that
app's state.
"""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("calendars", "0010_push_work_takes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="FollowUp",
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
                        ("title", models.CharField(max_length=1024)),
                        ("due_at", models.DateTimeField()),
                        ("done", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "repeat",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("", "Once"),
                                    ("daily", "Every day"),
                                    ("weekdays", "Every weekday (Monday to Friday)"),
                                    ("weekly", "Every week on the days ticked"),
                                    ("monthly", "Every month on the same day"),
                                ],
                                default="",
                                max_length=8,
                            ),
                        ),
                        (
                            "repeat_weekdays",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.PositiveSmallIntegerField(),
                                blank=True,
                                default=list,
                                size=None,
                            ),
                        ),
                        ("repeat_zone", models.CharField(blank=True, default="UTC", max_length=64)),
                        (
                            "reminder_minutes",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.PositiveIntegerField(),
                                blank=True,
                                default=list,
                                help_text="Nudge this many minutes before, each; empty means the user's default lead.",
                                size=None,
                            ),
                        ),
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
                        "db_table": "follow_ups",
                        "indexes": [
                            models.Index(
                                condition=models.Q(("done", False)),
                                fields=["user", "due_at"],
                                name="follow_ups_open_due_idx",
                            ),
                            models.Index(
                                condition=models.Q(
                                    ("done", False), models.Q(("repeat", ""), _negated=True)
                                ),
                                fields=["user"],
                                name="follow_ups_open_repeating_idx",
                            ),
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("repeat__in", ["", "daily", "weekdays", "weekly", "monthly"])
                                ),
                                name="follow_ups_repeat_known",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("reminder_minutes__len__lte", 5)),
                                name="follow_ups_reminders_capped",
                            ),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
