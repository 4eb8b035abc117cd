"""URL routes: the admin, the cron routes, health, and provider callbacks."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("scheduled_sends.urls")),
    path("calendars/", include("calendars.urls")),
]
