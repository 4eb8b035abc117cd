"""Routes of the queue: health, cron triggers, provider callbacks."""

from django.urls import path

from scheduled_sends import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
]
