"""The support console's pages for the queue and the sweep log.

* ``queue`` — the queue's list and read-only detail, its filters and columns;
* ``actions`` — release, retry and skip: each confirms, calls the queue's
  transition (``scheduled_sends/queue/transitions.py``) and reports;
* ``runs`` — the sweep run log, read-only.

A user's delivery settings have their page in ``accounts.admin``. Every view
runs under ``support_scope()`` (see ``console.admin_site``), so querysets
see every tenant's rows.
"""

from console.admin import queue, runs

__all__ = ["queue", "runs"]
