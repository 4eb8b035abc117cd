from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        # The product's knobs are validated at start-up, by every command and `check`.
        from core import checks  # noqa: F401  (registers the system check)
