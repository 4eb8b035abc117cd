"""Row-level security on the end-user area's tenant tables.

``portal_channel_addresses`` and ``portal_telegram_updates_seen`` are not
tenant tables: the first maps an inbound sender's keyed digest to its owner
(nothing else can choose the scope), the second holds update ids only.
"""

from django.db import migrations

from tenancy.rls import enable_tenant_rls


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0001_initial"),
        ("tenancy", "0001_support_role_grants"),
    ]

    operations = [
        enable_tenant_rls("portal_link_codes"),
        enable_tenant_rls("portal_api_tokens"),
        enable_tenant_rls("portal_opt_ins"),
    ]
