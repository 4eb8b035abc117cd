"""Planning in sets (``tenancy.scope.planning_scope``): the planner role's policy
and grants on the delivery settings, and the two columns of ``auth_user`` it reads (whether a user is active)."""

from django.db import migrations

from tenancy.rls import grant_planner, grant_planner_user_reads


class Migration(migrations.Migration):
    dependencies = [("accounts", "0004_delivery_settings_language_and_clock")]

    operations = [grant_planner("delivery_settings"), grant_planner_user_reads()]
