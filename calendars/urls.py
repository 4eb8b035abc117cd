"""Routes of connected calendars: OAuth consent and callbacks."""

from django.urls import path

urlpatterns: list = []
