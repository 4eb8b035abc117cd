from django.apps import AppConfig


class PacingConfig(AppConfig):
    name = "pacing"
    verbose_name = "Pacing"
