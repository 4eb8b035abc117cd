"""Linking's models now belong to messaging (its 0001) and AccountNotice to accounts
(its 0006): state only, the tables stay.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0001_initial"),
        ("accounts", "0006_account_notice_moved_from_portal"),
        ("portal", "0005_account_notices_twilio_seen_api_rate"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="accountnotice",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="channeladdress",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="linkcode",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="optinrecord",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="TelegramUpdateSeen",
                ),
                migrations.DeleteModel(
                    name="TwilioMessageSeen",
                ),
                migrations.DeleteModel(
                    name="AccountNotice",
                ),
                migrations.DeleteModel(
                    name="ChannelAddress",
                ),
                migrations.DeleteModel(
                    name="LinkCode",
                ),
                migrations.DeleteModel(
                    name="OptInRecord",
                ),
            ],
            database_operations=[],
        ),
    ]
