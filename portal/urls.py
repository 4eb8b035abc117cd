"""Routes of the end-user area (mounted at /)."""

from django.urls import path

from portal import account_views, calendar_views, settings_views, views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("follow-ups/", views.follow_up_list, name="follow_ups"),
    path("follow-ups/<int:follow_up_id>/", views.follow_up_edit, name="follow_up_edit"),
    path("follow-ups/<int:follow_up_id>/done", views.follow_up_done, name="follow_up_done"),
    path("follow-ups/<int:follow_up_id>/delete", views.follow_up_delete, name="follow_up_delete"),
    path("settings/", settings_views.settings_page, name="settings"),
    path("settings/zone", settings_views.use_device_zone, name="use_device_zone"),
    path("settings/telegram", settings_views.link_telegram, name="link_telegram"),
    path("settings/telegram/state", settings_views.telegram_link_state, name="telegram_link_state"),
    path("settings/whatsapp", settings_views.whatsapp_number, name="whatsapp_number"),
    path("settings/whatsapp/code", settings_views.whatsapp_code, name="whatsapp_code"),
    path("settings/tokens", settings_views.api_token_create, name="api_token_create"),
    path("settings/tokens/new", settings_views.api_token_new, name="api_token_new"),
    path(
        "settings/tokens/<int:token_id>/revoke",
        settings_views.api_token_revoke,
        name="api_token_revoke",
    ),
    path("account/", account_views.account_page, name="account"),
    path("account/email/<str:token>/", account_views.email_confirm, name="email_confirm"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("calendars/", calendar_views.calendars_page, name="calendars"),
    path("calendars/ics", calendar_views.calendar_add_ics, name="calendar_add_ics"),
    path("calendars/caldav", calendar_views.calendar_add_caldav, name="calendar_add_caldav"),
    path(
        "calendars/<int:connection_id>/caldav/choose",
        calendar_views.calendar_caldav_choose,
        name="calendar_caldav_choose",
    ),
    path(
        "calendars/<int:connection_id>/caldav/password",
        calendar_views.calendar_caldav_password,
        name="calendar_caldav_password",
    ),
    path(
        "calendars/<int:connection_id>/switches",
        calendar_views.calendar_switches,
        name="calendar_switches",
    ),
    path(
        "calendars/<int:connection_id>/disconnect",
        calendar_views.calendar_disconnect,
        name="calendar_disconnect",
    ),
]
