"""Table privileges for the support role (the staff admin's cross-tenant view)."""

from django.conf import settings
from django.db import migrations

from tenancy.rls import grant_dml_everywhere


class Migration(migrations.Migration):
    dependencies = [
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("sessions", "0001_initial"),
    ]

    operations = [grant_dml_everywhere(settings.NUDGE_DB_SUPPORT_ROLE)]
