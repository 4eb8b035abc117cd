"""The login role gets DML only; the tables belong to the owner role.

Runs as the owner (``manage.py migrate`` connects as it), so the default
privileges below are the owner's and cover every table a later migration
creates. The support role's grants are re-applied for the same reason: on a
database migrated before the owner role existed they were the login role's
defaults, which no longer apply to new tables.
"""

from django.conf import settings
from django.db import migrations

from tenancy.rls import grant_dml_everywhere


def _forward_only(operation: migrations.RunSQL) -> migrations.RunSQL:
    return migrations.RunSQL(sql=operation.sql, reverse_sql=migrations.RunSQL.noop)


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0001_support_role_grants")]

    operations = [
        grant_dml_everywhere(settings.NUDGE_DB_LOGIN_ROLE),
        _forward_only(grant_dml_everywhere(settings.NUDGE_DB_SUPPORT_ROLE)),
    ]
