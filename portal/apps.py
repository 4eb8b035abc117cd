from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "End-user area"

    def ready(self) -> None:
        from portal import signals  # noqa: F401 — connects the receivers
