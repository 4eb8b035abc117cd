"""The model now says what the database already has: ``fire_minute`` and three indexes.

Migrations 0003 and 0006 made these in SQL while the model could not name
them; now that ``fire_minute`` is a ``GeneratedField``, every index of the
queue is a ``Meta.indexes`` entry and Django's state matches the tables. The
database keeps its objects (only the receipts' index is made again, in the
model's words and under a name that fits Django's 30 characters); RunSQL is left for what Django cannot say: the table's
fillfactor and row-level security.
"""

from datetime import UTC

from django.db import migrations, models
from django.db.models.functions import TruncMinute


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0011_user_pending_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                # Re-made as the model words it (and under a name within Django's
                # 30 characters): NOT (id = '') rather than id <> ''. The receipt's
                # statement carries the same words, so the planner can use it.
                migrations.RunSQL(
                    sql="DROP INDEX scheduled_sends_provider_message_idx",
                    reverse_sql="CREATE INDEX scheduled_sends_provider_message_idx "
                    "ON scheduled_sends (provider_message_id) WHERE provider_message_id <> ''",
                ),
                migrations.AddIndex(
                    model_name="scheduledsend",
                    index=models.Index(
                        condition=models.Q(("provider_message_id", ""), _negated=True),
                        fields=["provider_message_id"],
                        name="sends_provider_message_idx",
                    ),
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="scheduledsend",
                    name="fire_minute",
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=TruncMinute("fire_at", tzinfo=UTC),
                        help_text="fire_at's minute (UTC): leads the claim's index, "
                        "so one minute is one range.",
                        output_field=models.DateTimeField(),
                    ),
                ),
                migrations.AddIndex(
                    model_name="scheduledsend",
                    index=models.Index(
                        condition=models.Q(("sent_at__isnull", True))
                        & models.Q(("outcome__isnull", True)),
                        fields=["fire_minute", "user_rank", "fire_at"],
                        name="scheduled_sends_due_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="scheduledsend",
                    index=models.Index(
                        condition=models.Q(("outcome__isnull", False)),
                        fields=["fire_at"],
                        name="scheduled_sends_settled_idx",
                    ),
                ),
                migrations.AddIndex(
                    model_name="scheduledsend",
                    index=models.Index(
                        condition=models.Q(("provider_message_id", ""), _negated=True),
                        fields=["provider_message_id"],
                        name="sends_provider_message_idx",
                    ),
                ),
            ],
        ),
    ]
