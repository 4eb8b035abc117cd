from django.apps import AppConfig


class FollowUpsConfig(AppConfig):
    name = "followups"
    verbose_name = "Follow-ups"
