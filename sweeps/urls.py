"""The sweeps for hosts whose cron speaks HTTP (a bearer secret, see ``cron_routes``)."""

from django.urls import path

from sweeps import cron_routes

urlpatterns = [
    path("cron/materialize", cron_routes.cron_materialize, name="cron-materialize"),
    path("cron/deliver", cron_routes.cron_deliver, name="cron-deliver"),
]
