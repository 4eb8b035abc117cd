"""Pacing budgets learn: a 429 lowers the rate in force for every process.

``channel_pacing`` keeps one row per named budget (a channel, or a calendar
provider per project/app and per user/mailbox), so the key is a budget name,
longer than a channel's. Beside the next free slot it now keeps the rate a
provider's 429 lowered it to (``rate``, since ``rate_since``; NULL: at the
ceiling) and the ceiling the last process configured (``ceiling``, for the
console). The rate in force is computed from these in the statements
(``scheduled_sends/queue/statements.py``), so no job has to raise it again.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduled_sends", "0015_failure_kind"),
    ]

    operations = [
        migrations.RenameField(model_name="channelpacing", old_name="channel", new_name="budget"),
        migrations.AlterField(
            model_name="channelpacing",
            name="budget",
            field=models.CharField(max_length=64, primary_key=True, serialize=False),
        ),
        migrations.AddField(
            model_name="channelpacing", name="ceiling", field=models.FloatField(null=True)
        ),
        migrations.AddField(
            model_name="channelpacing", name="rate", field=models.FloatField(null=True)
        ),
        migrations.AddField(
            model_name="channelpacing",
            name="rate_since",
            field=models.DateTimeField(null=True),
        ),
    ]
