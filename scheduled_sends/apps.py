from django.apps import AppConfig


class ScheduledSendsConfig(AppConfig):
    name = "scheduled_sends"
    verbose_name = "Scheduled sends"

    def ready(self) -> None:
        # accounts (a floor down) announces settings changes; the queue follows them.
        from accounts.signals import delivery_settings_changed
        from scheduled_sends.materialize import refresh_queue

        delivery_settings_changed.connect(refresh_queue, dispatch_uid="requeue-after-settings")
