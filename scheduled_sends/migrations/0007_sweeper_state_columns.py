"""The sweeper may update only the queue's state columns, never who or what a row is for.

Under the bypass the sweeper sees every tenant's queue rows; with a
table-wide UPDATE a bug in a settle-up could re-own a row (``user_id``) or
re-aim it (``kind``, ``ref_id``). Column grants make that a permission error.
"""

from django.db import migrations

from tenancy.rls import restrict_sweeper_updates


class Migration(migrations.Migration):
    dependencies = [("scheduled_sends", "0006_delivery_pipeline")]

    operations = [
        restrict_sweeper_updates(
            "scheduled_sends",
            # The state columns as they were then; later ones are granted by their migrations.
            (
                "claimed_at",
                "claim_token",
                "send_started_at",
                "sent_at",
                "outcome",
                "attempts",
                "not_before",
                "last_error",
                "channel",
                "provider_message_id",
                "delivery_status",
                "delivery_error_code",
                "delivery_updated_at",
                "fire_at",
            ),
        )
    ]
