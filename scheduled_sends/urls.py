"""Routes of the queue: health, cron triggers, provider callbacks."""

from django.urls import path

urlpatterns: list = []
