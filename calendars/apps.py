import logging

from django.apps import AppConfig


class CalendarsConfig(AppConfig):
    name = "calendars"
    verbose_name = "Calendars"

    def ready(self) -> None:
        # urllib3 logs each request's path at DEBUG, and an ICS feed's path is its secret.
        urllib3_logger = logging.getLogger("urllib3.connectionpool")
        urllib3_logger.setLevel(max(urllib3_logger.level, logging.INFO))
