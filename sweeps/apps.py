from django.apps import AppConfig


class SweepsConfig(AppConfig):
    name = "sweeps"
    verbose_name = "Sweeps"

    def ready(self) -> None:
        # Lower floors announce a person's changes; the queue follows them.
        from accounts.actions import plan_changed
        from sweeps.replan import refresh_queue

        plan_changed.connect(refresh_queue, dispatch_uid="replan-after-a-change")
