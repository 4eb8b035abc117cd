"""App configs that belong to the project rather than to one app."""

from django.contrib.admin.apps import AdminConfig


class NudgeAdminConfig(AdminConfig):
    """``django.contrib.admin`` with the support console as its default site.

    Swapping the default site (rather than mounting a second one) means every
    ``admin.site.register`` — ours and ``django.contrib.auth``'s — lands on the
    site whose views run under ``support_scope()``; there is no unscoped admin.
    """

    default_site = "console.admin_site.NudgeAdminSite"
