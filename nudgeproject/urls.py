"""URL routes: the admin, the end-user area, its API and webhooks, cron routes,
health, and provider callbacks."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("scheduled_sends.urls")),
    path("", include("portal.machine_urls")),
    path("calendars/", include("calendars.urls")),
    path("", include("portal.urls")),
]
