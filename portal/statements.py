"""The end-user area's SQL whose shape matters; ``portal.api_rate`` is its user.

Raw SQL lives here (and in migrations) only, as in ``pacing/statements.py``.
"""

# Count one API request against its account's minute (portal/api_rate.py), in the
# owner's tenant scope: the first request makes the row, a request a minute or more
# after the window began starts a new one, any other adds one. One statement, so
# concurrent requests of one account (any of its tokens, any web process) count one
# after another on the row's lock, held only while the server runs it. Answers the
# window's start and the count, this request included.
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
