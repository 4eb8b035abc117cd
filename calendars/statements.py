"""The sync's hot read, by hand: one statement per user per run.

Raw SQL lives here because this read runs once per user in every sweep and
the ORM built it afresh each time (a join and an ordering were most of the
read's CPU); ``calendars.sync`` is its only user. It runs inside the owner's
``tenant_scope``: row-level security admits only their rows.
"""

# The user's synced connections, least recently synced first (a user whose budget
# ran out last run gets the calendars it left out first), each carrying the
# owner's e-mail and time zone (``owner_email``, ``owner_timezone``) so a
# second query is not needed. ``auth_user`` is not a tenant table; the settings
# row is the owner's own.
USER_CONNECTIONS = """
SELECT c.*, u.email AS owner_email, coalesce(d.timezone, '') AS owner_timezone
FROM calendar_connections c
JOIN auth_user u ON u.id = c.user_id
LEFT JOIN delivery_settings d ON d.user_id = c.user_id
WHERE c.user_id = %s AND c.provider <> %s
ORDER BY c.last_synced_at ASC NULLS FIRST, c.id
"""
