"""Run by ``bench.push_scale`` inside one version's ``manage.py shell`` (never imported):
seeds live Google channels up to each size and times minute jobs; one JSON line a size."""

import json
import os
import random
import threading
import time
from datetime import timedelta

import psycopg
from cryptography.fernet import Fernet
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.db.backends import utils
from django.db.models import CharField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from calendars.models import CalendarConnection, PushWork
from calendars.push import notifications
from providers import crypto
from sweeps.sync_changed import run_sync_changed
from tests.fakes import google_server
from tests.fakes.google_server import FakeGoogle, google_event

try:
    from core.bearer import digest
except ImportError:  # a version from before core.bearer
    from calendars.push.secrets import digest

try:
    from accounts.models import DeliverySettings
except ImportError:
    from scheduled_sends.models import DeliverySettings

spec = json.loads(os.environ["PUSH_SCALE"])
settings.CALENDAR_TOKEN_KEYS = [Fernet.generate_key().decode()]
statements = [0]
lock = threading.Lock()
original = utils.CursorWrapper._execute_with_wrappers


def counted(self, *args, **kwargs):
    with lock:
        statements[0] += 1
    return original(self, *args, **kwargs)


utils.CursorWrapper._execute_with_wrappers = counted
connections.databases["seed"] = {
    **connections.databases["default"],
    "USER": "postgres",
    "PASSWORD": "",
}
google = FakeGoogle().start()
settings.GOOGLE_CLIENT_ID, settings.GOOGLE_CLIENT_SECRET = (
    google_server.CLIENT_ID,
    google_server.CLIENT_SECRET,
)
settings.GOOGLE_TOKEN_URL = google.token_url
settings.GOOGLE_API_BASE_URL = google.api_base_url
settings.CALENDAR_PUSH_BASE_URL = "http://127.0.0.1:9"  # Google's "sync" posts go nowhere
access, refresh = google.issue_tokens()
SECRET = "bench-channel-secret"  # noqa: S105 — the fake channel's token
now = timezone.now()
User = get_user_model()
channels = []  # (user id, connection id, channel id, resource id)
rng = random.Random(35)
WEEK = 7 * 24 * 3600


def seed(upto):
    first = len(channels)
    count = upto - first
    if count <= 0:
        return
    users = User.objects.using("seed").bulk_create(
        [User(username=f"ps{i}") for i in range(first, upto)], batch_size=2000
    )
    DeliverySettings.objects.using("seed").bulk_create(
        [DeliverySettings(user=u, channel="console", default_lead_minutes=10) for u in users],
        batch_size=2000,
    )
    made = []
    for i, user in enumerate(users, start=first):
        cal = f"cal{i}"
        start = now + timedelta(hours=1, minutes=i % 60)
        google.events[cal] = [
            google_event(
                f"e{k}", start + timedelta(hours=3 * k), start + timedelta(hours=3 * k, minutes=30)
            )
            for k in range(5)
        ]
        # Expiring evenly over the week ahead, renewed 12 h before: ~size/10,080 due a minute.
        expires = now + timedelta(hours=12, seconds=(i * 7919 % count + 0.5) * WEEK / count)
        made.append(
            CalendarConnection(
                user=user,
                provider="google",
                account=cal,
                calendar_id=cal,
                access_token_encrypted=crypto.encrypt(access),
                refresh_token_encrypted=crypto.encrypt(refresh),
                token_expires_at=now + timedelta(days=30),
                last_synced_at=now,
                push_state="live",
                push_channel_id=f"nudge-{user.pk}-0-x",
                push_resource_id=f"res-{cal}",
                push_secret_digest=digest(SECRET),
                push_expires_at=expires,
            )
        )
    made = CalendarConnection.objects.using("seed").bulk_create(made, batch_size=2000)
    CalendarConnection.objects.using("seed").filter(pk__in=[c.pk for c in made]).update(
        push_channel_id=Concat(
            Value("nudge-"), "user_id", Value("-"), "id", Value("-x"), output_field=CharField()
        )
    )
    PushWork.objects.using("seed").bulk_create(
        [
            PushWork(
                connection_id=c.pk,
                user_id=c.user_id,
                maintain_at=c.push_expires_at - timedelta(hours=12),
                polling=False,
                push_capable=True,
            )
            for c in made
        ],
        batch_size=2000,
    )
    for c in made:
        channels.append((c.user_id, c.pk, f"nudge-{c.user_id}-{c.pk}-x", f"res-{c.account}"))
    with connections["seed"].cursor() as cursor:
        cursor.execute("ANALYZE")


def seq_read():
    with psycopg.connect(
        os.environ["PUSH_SCALE_ADMIN"], dbname=connection.settings_dict["NAME"]
    ) as admin:
        admin.execute("SELECT pg_stat_clear_snapshot()")
        rows = admin.execute(
            "SELECT relname, coalesce(seq_tup_read, 0), coalesce(idx_tup_fetch, 0)"
            " FROM pg_stat_user_tables"
            " WHERE relname IN ('calendar_push_work', 'calendar_connections')"
        ).fetchall()
    return {name: [seq, idx] for name, seq, idx in rows}


numbers = {}
for size in spec["sizes"]:
    started = time.monotonic()
    seed(size)
    seeded_s = time.monotonic() - started
    jobs = []
    for job in range(spec["jobs"]):
        # Minute jobs a simulated minute apart after the seed (channels fall due as they
        # would); the leases and holds use the database's real clock, as in production.
        at = now + timedelta(minutes=job + 1 + spec["sizes"].index(size) * spec["jobs"])
        chosen = rng.sample(channels, max(1, round(size * spec["changed"])))
        accepted = 0
        for _user, cid, channel_id, resource_id in chosen:
            numbers[cid] = numbers.get(cid, 0) + 1
            accepted += (
                notifications.google(
                    {
                        "X-Goog-Channel-Id": channel_id,
                        "X-Goog-Channel-Token": SECRET,
                        "X-Goog-Resource-Id": resource_id,
                        "X-Goog-Resource-State": "exists",
                        "X-Goog-Message-Number": str(numbers[cid]),
                    },
                    at,
                )
                == "accepted"
            )
        # A backend reports its table statistics when it ends (an idle one only up to
        # 10 s later): every connection closed before and after the job, so the
        # sequential-scan rows read in between are the job's own.
        connections.close_all()
        time.sleep(1.2)
        before_seq = seq_read()
        before_calls, before_statements = len(google.requests), statements[0]
        job_started = time.monotonic()
        report = run_sync_changed(at)
        seconds = time.monotonic() - job_started
        job_statements = statements[0] - before_statements
        connections.close_all()
        time.sleep(1.2)
        after_seq = seq_read()
        calls = google.requests[before_calls:]
        jobs.append(
            {
                "notified": len(chosen),
                "accepted": accepted,
                "seconds": round(seconds, 3),
                "statements": job_statements,
                "provider_calls": len(calls),
                "provider_calls_by_kind": {
                    k: sum(1 for r in calls if r.path.endswith(k))
                    for k in ("/events", "/watch", "/stop", "/token")
                },
                "channels": dict(report.channels),
                "connections": dict(report.connections),
                "users": report.requeued.users,
                "seq_rows_read": {
                    t: after_seq[t][0] - before_seq.get(t, [0, 0])[0] for t in after_seq
                },
                "index_rows_fetched": {
                    t: after_seq[t][1] - before_seq.get(t, [0, 0])[1] for t in after_seq
                },
            }
        )
    print(
        "PUSH_SCALE " + json.dumps({"size": size, "seeded_s": round(seeded_s, 1), "jobs": jobs}),
        flush=True,
    )
google.stop()
