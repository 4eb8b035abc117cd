from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "sweeps"
    verbose_name = "Sweeps"

    def ready(self) -> None:
        # accounts (a floor down) announces settings changes; the queue follows them.
        from accounts.signals import delivery_settings_changed
        from sweeps.materialize import refresh_queue

        delivery_settings_changed.connect(refresh_queue, dispatch_uid="requeue-after-settings")
