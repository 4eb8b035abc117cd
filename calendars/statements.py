"""The sync's hot statements, by hand: they run for every user in every sweep. Each
runs inside the owner's ``tenant_scope`` (row-level security admits only their rows),
except the push work list's at the end (not a tenant table). Parameters are always
bound, never spliced.
"""

# The connection's columns the sync reads, in order: ``sync.ConnectionRow``'s names.
CONNECTION_COLUMNS = """
    id user_id provider account calendar_id
    access_token_encrypted refresh_token_encrypted feed_url_encrypted token_expires_at
    status last_synced_at retry_after resync_requested allow_private_network
    push_state push_expires_at
""".split()

# The user's synced connections, least recently synced first: ``CONNECTION_COLUMNS``,
# ``sync_state`` as JSON text, then the owner's e-mail and time zone.
USER_CONNECTIONS = """
SELECT {columns}, c.sync_state::text, u.email, coalesce(d.timezone, '')
FROM calendar_connections c
JOIN auth_user u ON u.id = c.user_id
LEFT JOIN delivery_settings d ON d.user_id = c.user_id
WHERE c.user_id = %(user)s AND c.provider <> %(local)s
ORDER BY c.last_synced_at ASC NULLS FIRST, c.id
""".format(columns=", ".join(f"c.{column}" for column in CONNECTION_COLUMNS))

# Refreshed tokens, encrypted, stored in the outcome's UPDATE (``_WITH_TOKENS``).
_TOKENS = """
    access_token_encrypted = %(access_token_encrypted)s,
    refresh_token_encrypted = %(refresh_token_encrypted)s,
    token_expires_at = %(token_expires_at)s,"""

# A successful fetch's outcome, locking the row for the rest of the write. What a
# changed copy left out is its ``last_error`` (%(note)s); an unchanged one keeps its
# note unless the connection was failing (``status`` on the right is the old one).
# ``resync_requested`` is cleared only if it was set when the row was read, so a
# request made while we fetched still gets its full sync. No row: deleted.
_RECORD_SUCCESS = """
UPDATE calendar_connections SET{tokens}
    last_synced_at = %(now)s,
    last_error = CASE
        WHEN %(changed)s THEN %(note)s
        WHEN status <> %(active)s THEN ''
        ELSE last_error
    END,
    status = %(active)s,
    retry_after = NULL,
    sync_state = %(sync_state)s::jsonb,
    resync_requested = resync_requested AND NOT %(full_sync)s
WHERE id = %(id)s
RETURNING last_error
"""
RECORD_SUCCESS = _RECORD_SUCCESS.format(tokens="")
RECORD_SUCCESS_WITH_TOKENS = _RECORD_SUCCESS.format(tokens=_TOKENS)

# A failed fetch's outcome (the message already scrubbed of secrets); no row: deleted.
_RECORD_FAILURE = """
UPDATE calendar_connections SET{tokens}
    last_error = %(error)s,
    status = %(status)s,
    retry_after = %(retry_after)s
WHERE id = %(id)s
RETURNING id
"""
RECORD_FAILURE = _RECORD_FAILURE.format(tokens="")
RECORD_FAILURE_WITH_TOKENS = _RECORD_FAILURE.format(tokens=_TOKENS)

# Make a connection's stored events exactly %(events)s (a JSON array, one object per
# unique (provider_event_id, occurrence_start), in the provider's order). Rows keyed
# alike are updated in place, only when they differ, so their ids (which queued
# nudges reference) stay stable; new keys are inserted in order; the rest deleted.
# ``IS NOT DISTINCT FROM`` matches a null occurrence_start as the unique constraint
# does. The caller holds the connection's row lock; nothing is inserted for a
# connection that is gone. Answers (created, updated, deleted).
APPLY_EVENTS = """
WITH incoming AS (
    SELECT *
    FROM ROWS FROM (
        json_to_recordset(%(events)s::json) AS (
            provider_event_id text, occurrence_start timestamptz, title text,
            starts_at timestamptz, ends_at timestamptz, all_day boolean, status text,
            declined boolean, reminder_minutes integer[], location text, join_url text
        )
    ) WITH ORDINALITY AS i(
        provider_event_id, occurrence_start, title, starts_at, ends_at, all_day, status,
        declined, reminder_minutes, location, join_url, position
    )
),
deleted AS (
    DELETE FROM calendar_events e
    WHERE e.connection_id = %(connection)s
      AND NOT EXISTS (
          SELECT FROM incoming i
          WHERE i.provider_event_id = e.provider_event_id
            AND i.occurrence_start IS NOT DISTINCT FROM e.occurrence_start
      )
    RETURNING 1
),
updated AS (
    UPDATE calendar_events e SET
        title = i.title, starts_at = i.starts_at, ends_at = i.ends_at, all_day = i.all_day,
        status = i.status, declined = i.declined, reminder_minutes = i.reminder_minutes,
        location = i.location, join_url = i.join_url, updated_at = %(stamp)s
    FROM incoming i
    WHERE e.connection_id = %(connection)s
      AND e.provider_event_id = i.provider_event_id
      AND e.occurrence_start IS NOT DISTINCT FROM i.occurrence_start
      AND (e.title, e.starts_at, e.ends_at, e.all_day, e.status, e.declined,
           e.reminder_minutes, e.location, e.join_url)
          IS DISTINCT FROM
          (i.title, i.starts_at, i.ends_at, i.all_day, i.status, i.declined,
           i.reminder_minutes, i.location, i.join_url)
    RETURNING 1
),
created AS (
    INSERT INTO calendar_events (
        user_id, connection_id, provider_event_id, occurrence_start, title, starts_at,
        ends_at, all_day, status, declined, reminder_minutes, location, join_url, updated_at
    )
    SELECT %(user)s, %(connection)s, i.provider_event_id, i.occurrence_start, i.title,
           i.starts_at, i.ends_at, i.all_day, i.status, i.declined, i.reminder_minutes,
           i.location, i.join_url, %(stamp)s
    FROM incoming i
    WHERE EXISTS (SELECT FROM calendar_connections c WHERE c.id = %(connection)s)
      AND NOT EXISTS (
        SELECT FROM calendar_events e
        WHERE e.connection_id = %(connection)s
          AND e.provider_event_id = i.provider_event_id
          AND e.occurrence_start IS NOT DISTINCT FROM i.occurrence_start
    )
    ORDER BY i.position
    RETURNING 1
)
SELECT (SELECT count(*) FROM created), (SELECT count(*) FROM updated),
       (SELECT count(*) FROM deleted)
"""


# The push work list (``calendars.push.worklist``): not a tenant table.

# The oldest changes waiting (new marks, and dead jobs' takes whose hold ran out),
# each held until ``lease`` from now; through ``push_work_change_order_idx``. A mark
# moves into ``taken_change_at``, leaving ``changed_at`` free for a notification
# that comes while the fetch is out. The rows are updated by key through an array: a
# join was planned as a hash join over the whole work list (tests/plans).
TAKE_CHANGED = """
WITH taken AS (
    SELECT connection_id
      FROM calendar_push_work
     WHERE (changed_at IS NOT NULL OR taken_change_at IS NOT NULL)
       AND (change_held_until IS NULL OR change_held_until <= statement_timestamp())
     ORDER BY least(changed_at, taken_change_at)
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
)
UPDATE calendar_push_work AS w
   SET taken_change_at = least(w.changed_at, w.taken_change_at),
       changed_at = NULL,
       change_held_until = statement_timestamp() + %(lease)s
 WHERE w.connection_id = ANY(ARRAY(SELECT connection_id FROM taken))
RETURNING w.connection_id, w.user_id, w.taken_change_at, w.change_held_until
"""

# Each take as its job leaves it, where the row still holds this job's take: done,
# let go; 'back', its mark back in ``changed_at`` (the older of the two); 'wait',
# held until ``until`` (a back-off's end).
SETTLE_CHANGED = """
UPDATE calendar_push_work AS w
   SET changed_at = CASE WHEN v.outcome = 'back' THEN least(w.changed_at, w.taken_change_at)
                         ELSE w.changed_at END,
       taken_change_at = CASE WHEN v.outcome = 'wait' THEN w.taken_change_at END,
       change_held_until = CASE WHEN v.outcome = 'wait' THEN v.until END
  FROM unnest(%(ids)s::bigint[], %(outcomes)s::text[], %(untils)s::timestamptz[],
              %(holds)s::timestamptz[]) AS v(id, outcome, until, held_until)
 WHERE w.connection_id = v.id AND w.change_held_until = v.held_until
   -- Said twice so the rows are found by the key (a join alone: a hash join, as above).
   AND w.connection_id = ANY(%(ids)s::bigint[])
"""
