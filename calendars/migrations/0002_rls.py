"""Row-level security on every calendar table."""

from django.db import migrations

from tenancy.rls import enable_tenant_rls


class Migration(migrations.Migration):
    dependencies = [
        ("calendars", "0001_initial"),
        ("tenancy", "0001_support_role_grants"),
    ]

    operations = [
        enable_tenant_rls("calendar_connections"),
        enable_tenant_rls("calendar_events"),
        enable_tenant_rls("follow_ups"),
    ]
