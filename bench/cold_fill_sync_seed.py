"""Run by ``bench.cold_fill_sync`` inside one version's ``manage.py shell`` (never
imported): users, settings and one calendar each, set-based through the version's
own ORM templates (``bench.data.replicate``); prints the connections made per kind."""

import json
import os
from datetime import datetime, timedelta

from accounts.models import DeliverySettings
from bench import data
from calendars.models import CalendarConnection
from providers import crypto
from tenancy.scope import support_scope

spec = json.loads(os.environ["CFS_SEED"])
now = datetime.fromisoformat(spec["now"])
ids = data.make_users(spec["users"], "cfs")
with support_scope():  # Telegram, each user a chat of their own (as bench.cold_fill seeds)
    settings = DeliverySettings.objects.create(
        user_id=ids[0], channel="telegram", default_lead_minutes=10, telegram_chat_id="1000000"
    )
    data.replicate(
        DeliverySettings,
        settings.pk,
        overrides={"user_id": "u", "telegram_chat_id": "(1000000 + u)::text"},
        source="unnest(%(ids)s::bigint[]) AS u",
        params={"ids": ids[1:]},
    )
n = len(ids)
# Slices of the users: (kind, provider, fields); every kind keeps its share exactly.
google = n * 4 // 10
graph = n * 4 // 10
expired = google // 10
revoked = max(1, google // 100)
kinds = [
    ("google_revoked", revoked, "google", spec["google"][0], "revoked-refresh-token", -1, ""),
    ("google_expired", expired, "google", spec["google"][0], spec["google"][1], -1, ""),
    ("google", google - expired - revoked, "google", *spec["google"], 2, ""),
    ("graph", graph, "microsoft", *spec["graph"], 2, ""),
]
for host, url in enumerate(spec["feeds"]):
    share = (n - google - graph) // len(spec["feeds"])
    if host == len(spec["feeds"]) - 1:
        share = n - google - graph - share * host
    kinds.append((f"ics{host}", share, "ics", "", "", 0, url))
counts = {}
first = 0
with support_scope():
    for kind, count, provider, access, refresh, expires_hours, feed in kinds:
        counts[kind] = count
        if count == 0:
            continue
        template = CalendarConnection.objects.create(
            user_id=ids[first],
            provider=provider,
            account="someone@example.com" if provider != "ics" else "feed",
            calendar_id="primary" if provider == "google" else "",
            allow_private_network=True,
            access_token_encrypted=crypto.encrypt(access) if access else "",
            refresh_token_encrypted=crypto.encrypt(refresh) if refresh else "",
            feed_url_encrypted=crypto.encrypt(feed) if feed else "",
            token_expires_at=now + timedelta(hours=expires_hours) if expires_hours else None,
        )
        data.replicate(
            CalendarConnection,
            template.pk,
            overrides={"user_id": "u"},
            source="unnest(%(ids)s::bigint[]) AS u",
            params={"ids": ids[first + 1 : first + count]},
        )
        first += count
print(json.dumps(counts))
