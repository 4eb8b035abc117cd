"""Routes of the queue: health, cron triggers, provider callbacks."""

from django.urls import path

from scheduled_sends import cron_routes, receipts, views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("metrics", views.metrics_view, name="metrics"),
]

# Provider callbacks and cron triggers: machine callers, signed or bearing a secret.
urlpatterns += [
    path("twilio/status", receipts.twilio_status, name="twilio-status"),
    path("cron/materialize", cron_routes.cron_materialize, name="cron-materialize"),
    path("cron/deliver", cron_routes.cron_deliver, name="cron-deliver"),
]
