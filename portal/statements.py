"""The end-user area's raw SQL, its only place outside migrations."""

# Count one API request against its account's minute, in the owner's scope: the first
# makes the row, one a window or more later starts a new window, any other adds one. One
# statement, so concurrent requests count one after another on the row's lock. Answers
# the window's start and the count, this request included.
COUNT_API_REQUEST = """
INSERT INTO portal_api_rates AS r (user_id, window_at, requests)
VALUES (%(user_id)s, %(now)s, 1)
ON CONFLICT (user_id) DO UPDATE
   SET window_at = CASE WHEN r.window_at > %(now)s - %(window)s THEN r.window_at
                        ELSE %(now)s END,
       requests = CASE WHEN r.window_at > %(now)s - %(window)s THEN r.requests + 1
                       ELSE 1 END
RETURNING window_at, requests
"""
