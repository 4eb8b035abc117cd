from django.apps import AppConfig


class ScheduledSendsConfig(AppConfig):
    name = "scheduled_sends"
    verbose_name = "Scheduled sends"

    def ready(self) -> None:
        # The product's knobs are validated at start-up (they are mostly the queue's).
        from core import checks  # noqa: F401  (registers the system check)
