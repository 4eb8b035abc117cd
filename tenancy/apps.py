from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    verbose_name = "Tenant isolation"

    def ready(self) -> None:
        from tenancy import checks  # noqa: F401  (registers the system check)
