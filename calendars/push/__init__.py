"""Push from Google and Microsoft Graph: a calendar is fetched when it changes.

* ``channels`` creates, renews and stops a connection's Google channel or Graph
  subscription (network; no tenant scope open during a call).
* ``notifications`` checks what arrives at the public endpoints
  (``calendars/views.py``) and only marks the connection changed.
* ``worklist`` is the minute job's to-do list (``PushWork``): notified
  connections and channels due for creation, renewal or a check.
* The minute job itself (``manage.py sync_changed``) lives in
  ``sweeps/sync_changed.py``: it maintains due channels, re-syncs
  changed connections and re-materializes their users.
* ``freshness`` decides, for the sweep, whether a connection must be fetched
  now or its stored copy is enough (push live, window covered, safety poll
  not due).
"""
