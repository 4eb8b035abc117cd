"""Routes of connected calendars (mounted at /calendars/): OAuth consent and callbacks,
and the push endpoints Google and Graph post to."""

from django.urls import path

from calendars import views

app_name = "calendars"

urlpatterns = [
    path("google/connect/", views.connect, {"provider": "google"}, name="google_connect"),
    path("google/callback/", views.callback, {"provider": "google"}, name="google_callback"),
    path("microsoft/connect/", views.connect, {"provider": "microsoft"}, name="microsoft_connect"),
    path(
        "microsoft/callback/", views.callback, {"provider": "microsoft"}, name="microsoft_callback"
    ),
    path("push/google/", views.google_push, name="google_push"),
    path("push/microsoft/", views.graph_push, {"lifecycle": False}, name="microsoft_push"),
    path(
        "push/microsoft/lifecycle/",
        views.graph_push,
        {"lifecycle": True},
        name="microsoft_lifecycle",
    ),
]
