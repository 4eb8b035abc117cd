"""The SQL of shared materialize cycles (``sweeps/cycle.py``); not tenant tables."""

# Every ``size``-th active user id but the last: the slices' upper bounds (the
# last slice has none, so a user who signs up mid-cycle is in it).
SLICE_BOUNDS = """
SELECT id FROM (
    SELECT id, row_number() OVER (ORDER BY id) AS n, count(*) OVER () AS total
    FROM auth_user WHERE is_active
) AS numbered
WHERE n %% %(size)s = 0 AND n < total
ORDER BY id
"""

# The first free slice in claim order (nobody holds it, or the lease lapsed),
# skipping rows being claimed; none once a newer cycle exists.
CLAIM_SLICE = """
UPDATE materialize_slices AS s
SET claimed_by = %(me)s,
    claimed_at = statement_timestamp(),
    takeovers = s.takeovers + (s.claimed_at IS NOT NULL)::int
FROM (
    SELECT id FROM materialize_slices
    WHERE cycle_id = %(cycle)s
      AND done_at IS NULL
      AND (claimed_at IS NULL OR claimed_at < statement_timestamp() - %(lease)s)
      AND NOT EXISTS (SELECT 1 FROM materialize_cycles WHERE starts_at > %(cycle)s)
    ORDER BY position
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS free
WHERE s.id = free.id
RETURNING s.id, s.position, s.after_id, s.up_to, s.takeovers > 0
"""

# Only the holder of an unfinished slice writes to it; no row: it was taken over (or done).
# Composed from constants only.
_HELD = "WHERE id = %(slice)s AND claimed_by = %(me)s AND done_at IS NULL"

RENEW_LEASE = f"UPDATE materialize_slices SET claimed_at = statement_timestamp() {_HELD}"  # noqa: S608

FINISH_SLICE = (
    f"UPDATE materialize_slices SET done_at = statement_timestamp(), users = %(users)s {_HELD}"  # noqa: S608
)

# A slice its holder could not finish (its budget ran out mid-slice): free at once.
RELEASE_SLICE = f"UPDATE materialize_slices SET claimed_by = '', claimed_at = NULL {_HELD}"  # noqa: S608

# Slices, done, free, participants, seconds until the first held lease lapses,
# and whether a newer cycle exists.
CYCLE_STATE = """
SELECT count(*),
       count(done_at),
       count(*) FILTER (WHERE done_at IS NULL AND claimed_at IS NULL),
       count(DISTINCT claimed_by) FILTER (WHERE claimed_by <> ''),
       extract(epoch FROM min(claimed_at + %(lease)s - statement_timestamp())
               FILTER (WHERE done_at IS NULL AND claimed_at IS NOT NULL))::float8,
       EXISTS (SELECT 1 FROM materialize_cycles WHERE starts_at > %(cycle)s)
FROM materialize_slices
WHERE cycle_id = %(cycle)s
"""

# The first slice, in claim order, a cycle left undone: the next cycle starts there.
FIRST_UNDONE_AFTER = """
SELECT after_id FROM materialize_slices
WHERE cycle_id = (SELECT max(starts_at) FROM materialize_cycles WHERE starts_at < %(cycle)s)
  AND done_at IS NULL
ORDER BY position
LIMIT 1
"""

# Burst smoothing, one participant at a time (a session lock).
SMOOTHING_LOCK_KEY = 0x6E75_6467_6573_6D74
SMOOTHING_LOCK = f"SELECT pg_advisory_lock({SMOOTHING_LOCK_KEY})"
SMOOTHING_UNLOCK = f"SELECT pg_advisory_unlock({SMOOTHING_LOCK_KEY})"
