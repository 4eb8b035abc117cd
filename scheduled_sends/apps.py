from django.apps import AppConfig


class ScheduledSendsConfig(AppConfig):
    name = "scheduled_sends"
    verbose_name = "Scheduled sends"
