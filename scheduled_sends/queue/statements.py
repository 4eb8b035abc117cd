"""Every raw SQL statement the queue runs; all parameters are bound (``%(name)s``). Every
statement that reads due rows carries the predicate of the partial index
``scheduled_sends_due_idx`` (``sent_at IS NULL AND outcome IS NULL``), so its cost is
O(rows due), never O(rows queued) or O(tenants)."""

# Idempotent: the unique key on the *intended* instant arbitrates, so a row
# whose send time was moved earlier still counts.
INSERT_NUDGES = """
INSERT INTO scheduled_sends (user_id, kind, ref_id, intended_at, fire_at, subject_starts_at,
                             user_rank, channel)
SELECT n.user_id, n.kind, n.ref_id, n.intended_at, n.intended_at, n.subject_starts_at,
       n.user_rank, n.channel
  FROM unnest(%(user_ids)s::bigint[], %(kinds)s::text[], %(ref_ids)s::bigint[],
              %(intended_ats)s::timestamptz[], %(starts)s::timestamptz[],
              %(ranks)s::smallint[], %(channels)s::text[])
       AS n(user_id, kind, ref_id, intended_at, subject_starts_at, user_rank, channel)
ON CONFLICT (user_id, kind, ref_id, intended_at) DO NOTHING
RETURNING user_id
"""

# No SELECT … FOR UPDATE: the planner role may delete but not update the
# queue. The DELETE re-checks ``claimed_at IS NULL`` on a row claimed
# meanwhile and leaves it to that run.
WITHDRAW_UNCLAIMED = """
DELETE FROM scheduled_sends
 WHERE id = ANY(%(ids)s::bigint[])
   AND sent_at IS NULL
   AND outcome IS NULL
   AND claimed_at IS NULL
RETURNING user_id
"""

# The claim. The locking sub-select sits in WITH because PostgreSQL evaluates
# it once; under ``WHERE id IN (…)`` it may be re-run inside a join and update
# more rows than LIMIT (PostgreSQL bug report #15715).
#
# Order: oldest minute first, then every user's first nudge before anyone's
# second (``user_rank``), so one tenant's burst cannot hold back the others;
# the plan walks ``scheduled_sends_due_idx`` in this order and stops at LIMIT.
# ``fire_minute`` is a UTC ``timestamp``, hence ``AT TIME ZONE 'UTC'``. The
# ``intended_at`` bounds prune the plan to yesterday's, today's and
# tomorrow's day partitions. The bound ahead is loose on purpose: a tight one
# made the planner estimate fewer rows than LIMIT and sort every due row.
# Joining on ``intended_at`` as well as ``id`` routes each update to its partition.
CLAIM_DUE = """
WITH due AS (
    SELECT id, intended_at
      FROM scheduled_sends
     WHERE sent_at IS NULL
       AND outcome IS NULL
       AND fire_minute <= (%(now)s::timestamptz AT TIME ZONE 'UTC')
       AND fire_minute > ((%(now)s::timestamptz - %(oldest)s) AT TIME ZONE 'UTC')
       AND fire_at <= %(now)s
       AND intended_at > %(intended_after)s
       AND intended_at < %(intended_before)s
       AND (claimed_at IS NULL OR claimed_at < %(now)s::timestamptz - %(lease)s)
       AND (not_before IS NULL OR not_before <= %(now)s)
     ORDER BY fire_minute, user_rank, fire_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE scheduled_sends AS s
   SET claimed_at = %(now)s,
       claim_token = gen_random_uuid()
  FROM due
 WHERE s.id = due.id AND s.intended_at = due.intended_at
RETURNING s.id, s.user_id, s.kind, s.ref_id, s.intended_at, s.fire_at, s.subject_starts_at,
          s.claim_token, s.attempts, s.send_started_at, s.user_rank, s.created_at
"""

# Unsent rows past the grace window: settled ``expired``. Rows under a live
# lease belong to their claimant.
EXPIRE_PAST_GRACE = """
WITH stale AS (
    SELECT id
      FROM scheduled_sends
     WHERE sent_at IS NULL
       AND outcome IS NULL
       AND fire_minute <= ((%(now)s::timestamptz - %(grace)s) AT TIME ZONE 'UTC')
       AND intended_at <= %(now)s::timestamptz - %(grace)s
       AND (claimed_at IS NULL OR claimed_at < %(now)s::timestamptz - %(lease)s)
     ORDER BY fire_minute
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE scheduled_sends AS s
   SET outcome = 'expired',
       last_error = %(reason)s,
       claimed_at = NULL,
       claim_token = NULL
  FROM stale
 WHERE s.id = stale.id
RETURNING s.id
"""

# One claimed row's owner settings and subject state, read in the owner's
# tenant scope; always exactly one row. ``subjects.Facts`` is made of these names.
RESOLVE_COLUMNS: dict[str, str] = {
    "has_settings": "ds.id IS NOT NULL",
    "enabled": "coalesce(ds.enabled, false)",
    "channel": "coalesce(ds.channel, '')",
    "whatsapp_number": "coalesce(ds.whatsapp_number, '')",
    "telegram_chat_id": "coalesce(ds.telegram_chat_id, '')",
    "timezone": "coalesce(ds.timezone, 'UTC')",
    "found": "coalesce(ev.id, fu.id) IS NOT NULL",
    "title": "coalesce(ev.title, fu.title, '')",
    "starts_at": "coalesce(ev.starts_at, fu.due_at)",
    "cancelled": "coalesce(ev.status = %(cancelled)s, false)",
    "declined": "coalesce(ev.declined, false)",
    "all_day": "coalesce(ev.all_day, false)",
    "needs_reauth": "coalesce(cc.status = %(needs_reauth)s, false)",
    "done": "coalesce(fu.done, false)",
    "paused": "coalesce(ds.paused, false)",
    "paused_reason": "coalesce(ds.paused_reason, '')",
    "unreachable_channel": "coalesce(ds.unreachable_channel, '')",
    "unreachable_reason": "coalesce(ds.unreachable_reason, '')",
    "quiet_start": "ds.quiet_start",
    "quiet_end": "ds.quiet_end",
    # A deactivated account is sent nothing, whatever is still queued for it.
    "user_active": "EXISTS (SELECT 1 FROM auth_user AS u WHERE u.id = %(user_id)s AND u.is_active)",
    # The calendar's switches (its Calendars card) and a follow-up's repeat rule.
    "calendar_off": "coalesce(NOT cc.nudges_on, false)",
    "skip_all_day": "coalesce(cc.skip_all_day, true)",
    "repeat": "coalesce(fu.repeat, '')",
    "repeat_weekdays": "coalesce(fu.repeat_weekdays, '{}')",
    "repeat_zone": "coalesce(fu.repeat_zone, 'UTC')",
    "language": "coalesce(ds.language, 'en')",
    "clock": "coalesce(ds.clock, '24h')",
    "location": "coalesce(ev.location, '')",
    "join_url": "coalesce(ev.join_url, '')",  # only a link that passed providers.meeting_links
    # A Snooze tap queued this row (written as the snoozed shape): an act of the same
    # subject snoozed to its instant.
    "snoozed": (
        "EXISTS (SELECT 1 FROM nudge_acts AS na WHERE na.user_id = %(user_id)s"
        " AND na.act = %(snooze)s AND na.kind = %(kind)s AND na.ref_id = %(ref_id)s"
        " AND na.snoozed_until = %(intended_at)s)"
    ),
}
RESOLVE_NUDGE = (
    "SELECT "
    + ",\n       ".join(f"{expression} AS {name}" for name, expression in RESOLVE_COLUMNS.items())
    + """
  FROM (VALUES (1)) AS one (x)
  LEFT JOIN delivery_settings AS ds ON ds.user_id = %(user_id)s
  LEFT JOIN calendar_events AS ev
         ON %(kind)s = %(event)s AND ev.id = %(ref_id)s AND ev.user_id = %(user_id)s
  LEFT JOIN calendar_connections AS cc ON cc.id = ev.connection_id
  LEFT JOIN follow_ups AS fu
         ON %(kind)s = %(follow_up)s AND fu.id = %(ref_id)s AND fu.user_id = %(user_id)s
"""
)

# A settle-up over a group of rows, each fenced by its own claim token so a
# lost claim cannot overwrite a newer one; RETURNING names the rows that
# matched. Every statement takes the same parallel arrays
# (``transitions.Settlement``); ``intended_at`` routes each update to its partition.
_GROUP = """
  FROM unnest(%(ids)s::bigint[], %(intended_ats)s::timestamptz[], %(tokens)s::uuid[],
              %(ats)s::timestamptz[], %(channels)s::text[], %(message_ids)s::text[],
              %(reasons)s::text[], %(not_befores)s::timestamptz[], %(failure_kinds)s::text[])
       AS v(id, intended_at, token, at, channel, message_id, reason, not_before, failure_kind)
 WHERE s.id = v.id AND s.intended_at = v.intended_at AND s.claim_token = v.token
   AND s.sent_at IS NULL AND s.outcome IS NULL
RETURNING s.id
"""

# What each ``transitions.Transition`` sets. MARK_SENDING comes just before the provider
# is called: a row it does not return must not be sent. RETRY (a transient failure or
# 429) is claimed again after ``not_before``; RELEASE hands back an untried row, no attempt.
SETTLE = {
    transition: f"UPDATE scheduled_sends AS s\n   SET {sets}{_GROUP}"
    for transition, sets in {
        "MARK_SENDING": "send_started_at = v.at, channel = v.channel",
        "SENT": "sent_at = v.at, outcome = 'sent', provider_message_id = v.message_id, "
        "channel = v.channel, last_error = ''",
        "SKIPPED": "sent_at = v.at, outcome = 'skipped', last_error = v.reason",
        "FAILED": "outcome = 'failed', last_error = v.reason, failure_kind = v.failure_kind, "
        "attempts = s.attempts + 1",
        "RETRY": "claimed_at = NULL, claim_token = NULL, send_started_at = NULL, "
        "attempts = s.attempts + 1, last_error = v.reason, not_before = v.not_before",
        "RELEASE": "claimed_at = NULL, claim_token = NULL, send_started_at = NULL, "
        "not_before = v.not_before",
    }.items()
}

# Receipts arrive out of order; a status only replaces one of lower rank (or
# repeats itself), so a late "failed" cannot overwrite "delivered".
RECEIPT_RANKS = {
    "": 0,
    "accepted": 1,
    "queued": 1,
    "sending": 2,
    "sent": 3,
    "delivered": 4,
    "undelivered": 4,
    "failed": 4,
    "read": 5,
}
_RANK_OF_STORED = " ".join(
    f"WHEN '{status}' THEN {rank}" for status, rank in RECEIPT_RANKS.items() if status
)
# A sent row reported undelivered gets that failure kind ("read" clears it).
RECORD_RECEIPT = f"""
UPDATE scheduled_sends
   SET delivery_status = %(status)s, delivery_error_code = %(error_code)s,
       delivery_updated_at = statement_timestamp(),
       failure_kind = CASE WHEN outcome = 'sent' THEN %(failure_kind)s ELSE failure_kind END
 WHERE provider_message_id = %(provider_message_id)s
   AND NOT (provider_message_id = '')
   AND (%(rank)s > CASE delivery_status {_RANK_OF_STORED} ELSE 0 END
        OR delivery_status = %(status)s)
"""

PRUNE_SETTLED = """
WITH old AS (
    SELECT id
      FROM scheduled_sends
     WHERE outcome IS NOT NULL
       AND fire_at < %(cutoff)s
     ORDER BY fire_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
DELETE FROM scheduled_sends AS s
 USING old
 WHERE s.id = old.id
"""

CURRENT_TIME = "SELECT statement_timestamp()"

# Pending, unclaimed nudges per channel and minute: a range scan of the due index.
LOAD_PER_MINUTE = """
SELECT channel, fire_minute, count(*)
  FROM scheduled_sends
 WHERE sent_at IS NULL AND outcome IS NULL AND claimed_at IS NULL
   AND fire_minute > (%(after)s::timestamptz AT TIME ZONE 'UTC')
   AND fire_minute <= (%(until)s::timestamptz AT TIME ZONE 'UTC')
 GROUP BY channel, fire_minute
"""

# Only rows still at their intended instant move (a second run reshuffles
# nothing), the heaviest users' extra nudges (highest ``user_rank``) first.
MOVE_EARLIER = """
WITH moving AS (
    SELECT id
      FROM scheduled_sends
     WHERE sent_at IS NULL AND outcome IS NULL AND claimed_at IS NULL
       AND fire_minute = (%(minute)s::timestamptz AT TIME ZONE 'UTC')
       AND channel = %(channel)s
       AND fire_at = intended_at
     ORDER BY user_rank DESC, id DESC
     LIMIT %(count)s
       FOR UPDATE SKIP LOCKED
)
UPDATE scheduled_sends AS s
   SET fire_at = s.fire_at - %(by)s
  FROM moving
 WHERE s.id = moving.id
RETURNING s.id
"""

# Partitions and their ranges; ``FROM (MINVALUE)`` (the pre-partitioning table) has no start.
QUEUE_PARTITIONS = """
SELECT c.relname,
       (regexp_match(b.bound, 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz,
       (regexp_match(b.bound, 'TO \\(''([^'']+)''\\)'))[1]::timestamptz
  FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid,
       LATERAL (SELECT pg_get_expr(c.relpartbound, c.oid)) AS b (bound)
 WHERE i.inhparent = 'scheduled_sends'::regclass
 ORDER BY 3
"""

# DDL queued behind a long claim would queue every later claim behind itself.
PARTITION_LOCK_TIMEOUT = "SET LOCAL lock_timeout = '5s'"

# ``{name}`` is made by partitions.partition_name from a date, never from input. A
# partitioned parent holds no storage, so each partition carries room for the claim's
# heap-only updates, and early autovacuum.
CREATE_DAY_PARTITION = (
    "CREATE TABLE {name} PARTITION OF scheduled_sends "
    "FOR VALUES FROM (%(start)s) TO (%(end)s) WITH (fillfactor = 50, "
    "autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02, "
    "autovacuum_vacuum_insert_scale_factor = 0.05)"
)

# The planner's own row estimate of a partition (kept by ANALYZE and autovacuum).
PARTITION_ROWS = "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass"

DROP_PARTITION = "DROP TABLE {name}"
