"""Every raw SQL statement the queue runs, in one place.

The ORM covers the tenant-scoped reads; these are the statements whose exact
shape matters: the idempotent insert, the one-statement claim, the fenced
settle-ups, and the health counts. All parameters are bound (``%(name)s``).

Every statement that reads due rows carries the same predicate as the
partial index ``scheduled_sends_due_idx`` (``sent_at IS NULL AND outcome IS
NULL``), so the planner can walk that index in ``fire_at`` order and stop
after ``LIMIT`` rows: cost O(rows due), never O(rows queued) or O(tenants).
"""

# Materialise: one row per nudge; a second run over the same window, or a
# concurrent one, inserts nothing (the unique index arbitrates).
INSERT_NUDGES = """
INSERT INTO scheduled_sends (user_id, kind, ref_id, fire_at, subject_starts_at)
SELECT %(user_id)s, n.kind, n.ref_id, n.fire_at, n.subject_starts_at
  FROM unnest(%(kinds)s::text[], %(ref_ids)s::bigint[],
              %(fire_ats)s::timestamptz[], %(starts)s::timestamptz[])
       AS n(kind, ref_id, fire_at, subject_starts_at)
ON CONFLICT (user_id, kind, ref_id, fire_at) DO NOTHING
RETURNING id
"""

# The claim. The locking sub-select sits in WITH because PostgreSQL evaluates
# a WITH query once; the same sub-select under ``WHERE id IN (…)`` may be
# re-run inside a join and update more rows than LIMIT (bug report #15715,
# answered as expected behaviour). SKIP LOCKED lets concurrent runs step over
# each other's rows instead of queueing behind a slow send.
CLAIM_DUE = """
WITH due AS (
    SELECT id
      FROM scheduled_sends
     WHERE sent_at IS NULL
       AND outcome IS NULL
       AND fire_at <= %(now)s
       AND fire_at > %(now)s - %(grace)s
       AND (claimed_at IS NULL OR claimed_at < %(now)s - %(lease)s)
       AND (not_before IS NULL OR not_before <= %(now)s)
     ORDER BY fire_at
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE scheduled_sends AS s
   SET claimed_at = %(now)s,
       claim_token = gen_random_uuid()
  FROM due
 WHERE s.id = due.id
RETURNING s.id, s.user_id, s.kind, s.ref_id, s.fire_at, s.subject_starts_at,
          s.claim_token, s.attempts, s.send_started_at
"""

# Rows that fell past the grace window unsent: settled ``expired``, never
# sent, so the partial index holds only live work. Claimed rows whose lease
# is still running belong to their claimant.
EXPIRE_PAST_GRACE = """
WITH stale AS (
    SELECT id
      FROM scheduled_sends
     WHERE sent_at IS NULL
       AND outcome IS NULL
       AND fire_at <= %(now)s - %(grace)s
       AND (claimed_at IS NULL OR claimed_at < %(now)s - %(lease)s)
     ORDER BY fire_at
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

# Every settle-up is fenced by the claim token: a run whose lease expired
# and whose row was claimed again cannot overwrite the newer claim.
_FENCE = "WHERE id = %(id)s AND claim_token = %(token)s AND sent_at IS NULL AND outcome IS NULL"

# Just before the provider is called. Doubles as a last check that the claim
# is still ours: if this matches nothing, the run must not send.
MARK_SENDING = f"""
UPDATE scheduled_sends
   SET send_started_at = %(now)s, channel = %(channel)s
 {_FENCE}
"""

SETTLE_SENT = f"""
UPDATE scheduled_sends
   SET sent_at = %(now)s, outcome = 'sent', provider_message_id = %(provider_message_id)s,
       channel = %(channel)s, last_error = ''
 {_FENCE}
"""

SETTLE_SKIPPED = f"""
UPDATE scheduled_sends
   SET sent_at = %(now)s, outcome = 'skipped', last_error = %(reason)s
 {_FENCE}
"""

SETTLE_FAILED = f"""
UPDATE scheduled_sends
   SET outcome = 'failed', last_error = %(reason)s, attempts = attempts + 1
 {_FENCE}
"""

# A transient failure: let the next run try again (after ``not_before`` when
# the provider asked us to wait), counting the attempt.
SETTLE_RETRY = f"""
UPDATE scheduled_sends
   SET claimed_at = NULL, claim_token = NULL, send_started_at = NULL,
       attempts = attempts + 1, last_error = %(reason)s, not_before = %(not_before)s
 {_FENCE}
"""

# Claimed but not attempted (the run's budget ran out, or its channel is
# rate limited): hand the row back without counting an attempt.
RELEASE_UNTRIED = f"""
UPDATE scheduled_sends
   SET claimed_at = NULL, claim_token = NULL, not_before = %(not_before)s
 {_FENCE}
"""

# A provider's delivery receipt (e.g. Twilio's status callback). Receipts
# arrive out of order; a status only replaces one of lower rank (or repeats
# itself), so a late "failed" cannot overwrite "delivered" of the same rank.
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
RECORD_RECEIPT = f"""
UPDATE scheduled_sends
   SET delivery_status = %(status)s, delivery_error_code = %(error_code)s,
       delivery_updated_at = %(now)s
 WHERE provider_message_id = %(provider_message_id)s
   AND provider_message_id <> ''
   AND (%(rank)s > CASE delivery_status {_RANK_OF_STORED} ELSE 0 END
        OR delivery_status = %(status)s)
"""

# Health counts over the due part of the queue only (an index range scan).
QUEUE_HEALTH = """
SELECT count(*) FILTER (WHERE fire_at > %(now)s - %(grace)s)
           AS due_backlog,
       count(*) FILTER (WHERE claimed_at IS NULL AND fire_at <= %(now)s - %(overdue)s
                          AND fire_at > %(now)s - %(grace)s
                          AND (not_before IS NULL OR not_before <= %(now)s))
           AS overdue_unclaimed,
       count(*) FILTER (WHERE claimed_at IS NOT NULL AND claimed_at < %(now)s - %(lease)s)
           AS stuck_claims,
       count(*) FILTER (WHERE fire_at <= %(now)s - %(grace)s
                          AND (claimed_at IS NULL OR claimed_at < %(now)s - %(lease)s))
           AS awaiting_expiry,
       min(fire_at) AS oldest_due_fire_at
  FROM scheduled_sends
 WHERE sent_at IS NULL AND outcome IS NULL AND fire_at <= %(now)s
"""

# Retention: settled rows older than the cut-off, a bounded batch at a time.
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
