"""AccountNotice moves here from portal: state only, the table (``portal_account_notices``)
keeps its name, rows, policies and grants; portal 0006 drops it from that app's state.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0005_account_notices_twilio_seen_api_rate"),
        ("accounts", "0005_planner_role"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AccountNotice",
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
                            models.Index(
                                fields=["user", "-created_at"], name="portal_notices_user_idx"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
