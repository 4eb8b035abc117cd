"""A failed row says what kind of failure it was, as a value (``scheduled_sends/failures.py``).

Pages used to recognise "may have been delivered" by matching ``last_error``
text. The kind is a state column the sweeper writes in its settle-ups and
receipts, so it is granted to the sweeper here. Rows already settled get their
kind from their ``last_error`` where the text says it (the texts as delivery
and the channels wrote them); a failure whose text says nothing keeps "".
"""

from django.db import migrations, models

from tenancy.rls import across_tenants, grant_sweeper_updates

# The texts as delivery and the channels wrote them when this migration was
# made; frozen here on purpose. ("%%" is "%" to LIKE: either way, any text.)
BACKFILL = """
UPDATE scheduled_sends
   SET failure_kind = CASE
        WHEN outcome = 'sent' THEN 'undelivered'
        WHEN last_error = 'delivery was interrupted mid-send (the worker died); '
                          'not resent, to avoid a duplicate' THEN 'interrupted'
        WHEN last_error LIKE 'the channel accepted the message but returned no usable '
                             'message id;%%' THEN 'unusable_receipt'
        WHEN last_error LIKE '[protocol] %%accepted the message but its answer was unreadable%%'
            THEN 'unusable_receipt'
        WHEN last_error LIKE '%% — it may have been delivered; not resent' THEN 'unconfirmed'
        WHEN last_error LIKE 'no address configured for the %%' THEN 'no_address'
        WHEN last_error LIKE '[config] %%'
          OR last_error LIKE '[401] Telegram rejected the bot token%%' THEN 'configuration'
        WHEN last_error LIKE '[%%] %%' THEN 'refused'
        ELSE '' END
 WHERE outcome = 'failed'
    OR outcome = 'sent' AND delivery_status IN ('undelivered', 'failed')
"""


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0014_delivery_settings_moved_to_accounts"),
    ]

    operations = [
        migrations.AddField(
            model_name="scheduledsend",
            name="failure_kind",
            field=models.CharField(
                blank=True,
                choices=[
                    ("refused", "The provider refused it"),
                    ("configuration", "Our channel configuration"),
                    ("no_address", "No address for the channel"),
                    ("unconfirmed", "No answer from the provider (may have been delivered)"),
                    ("unusable_receipt", "Unusable answer (may have been delivered)"),
                    ("interrupted", "Interrupted mid-send (may have been delivered)"),
                    ("undelivered", "Sent, but the provider reported it undelivered"),
                ],
                db_default="",
                help_text="What went wrong (scheduled_sends/failures.py); "
                "last_error says it in words.",
                max_length=20,
            ),
        ),
        grant_sweeper_updates("scheduled_sends", ["failure_kind"]),
        across_tenants("scheduled_sends", BACKFILL),
        migrations.AddConstraint(
            model_name="scheduledsend",
            constraint=models.CheckConstraint(
                condition=models.Q(failure_kind="")
                | (models.Q(outcome="failed") & ~models.Q(failure_kind="undelivered"))
                | models.Q(outcome="sent", failure_kind="undelivered"),
                name="scheduled_sends_failure_kind_matches_outcome",
            ),
        ),
    ]
