"""Routes of the queue: health, cron triggers, provider callbacks."""

urlpatterns: list = []
