"""Routes for machines: the follow-ups and calendars API and its schema."""

from django.urls import path, re_path

from portal import api

urlpatterns = [
    path("api/follow-ups", api.follow_ups, name="api-follow-ups"),
    path("api/follow-ups/<int:follow_up_id>", api.follow_up, name="api-follow-up"),
    path("api/calendars", api.calendars, name="api-calendars"),
    path("api/calendars/caldav", api.caldav_connect, name="api-caldav-connect"),
    path(
        "api/calendars/<int:connection_id>/caldav/choose",
        api.caldav_choose,
        name="api-caldav-choose",
    ),
    path(
        "api/calendars/<int:connection_id>/caldav/password",
        api.caldav_password,
        name="api-caldav-password",
    ),
    path("api/schema", api.api_schema, name="api-schema"),
    # Anything else under api/ (``/api/follow-ups/abc``): a JSON 404, not the site's page.
    re_path(r"^api/", api.not_found, name="api-not-found"),
]
