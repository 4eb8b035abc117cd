from django.contrib.admin.apps import AdminConfig


class NudgeAdminConfig(AdminConfig):
    """``django.contrib.admin`` with the support console as its default site, so every
    ``admin.site.register`` (``django.contrib.auth``'s too) runs under ``support_scope()``."""

    default_site = "console.admin_site.NudgeAdminSite"
