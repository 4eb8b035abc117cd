from django.urls import path

from sweeps import cron_routes

urlpatterns = [
    path(f"cron/{sweep}", cron_routes.cron_sweep, {"sweep": sweep}, name=f"cron-{sweep}")
    for sweep in ("materialize", "deliver", "sync_changed")
]
