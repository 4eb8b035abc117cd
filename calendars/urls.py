"""Routes of connected calendars: OAuth consent and callbacks."""

urlpatterns: list = []
