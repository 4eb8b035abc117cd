"""The support console's pages for the queue (``queue``, ``actions``) and the sweep log
(``runs``); every view runs in ``support_scope()``, so querysets see every tenant."""

from console.admin import queue, runs

__all__ = ["queue", "runs"]
