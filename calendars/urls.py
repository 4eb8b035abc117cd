"""Routes of connected calendars: OAuth consent and callbacks (mounted at /calendars/)."""

from django.urls import path

from calendars import views

app_name = "calendars"

urlpatterns = [
    path("google/connect/", views.google_connect, name="google_connect"),
    path("google/callback/", views.google_callback, name="google_callback"),
    path("microsoft/connect/", views.microsoft_connect, name="microsoft_connect"),
    path("microsoft/callback/", views.microsoft_callback, name="microsoft_callback"),
]
