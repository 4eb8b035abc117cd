"""The support console's pages for the queue, delivery settings and the sweep log.

* ``queue`` — the queue's list and read-only detail, its filters and columns;
* ``actions`` — release, retry and skip: each confirms, calls the queue's
  transition (``scheduled_sends/queue/transitions.py``) and reports;
* ``delivery_settings`` — a user's channel, address, zone and lead;
* ``runs`` — the sweep run log, read-only.

Every view runs under ``support_scope()`` (see ``nudgeproject.admin_site``),
so querysets see every tenant's rows.
"""

from scheduled_sends.admin import delivery_settings, queue, runs

__all__ = ["delivery_settings", "queue", "runs"]
