"""The sweep run log: every run records itself, so silence is never ambiguous.

A run that crashed, a run that never started and a run that found nothing
due all print nothing alarming on their own; the log (``sweep_runs``) plus
``nudge_health`` tell them apart. It holds counts and error classes, never
titles, addresses or other user data.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.db import DatabaseError
from django.utils import timezone

from scheduled_sends.models import SweepRun

logger = logging.getLogger("nudge.runlog")


@contextmanager
def recorded_run(sweep: str, as_of: datetime) -> Iterator[SweepRun]:
    """Record a sweep run; the caller fills ``run.counts`` and ``run.summary``.

    An exception marks the run failed (and propagates); otherwise the run is
    ok unless the caller set ``run.status`` itself.
    """
    run = SweepRun.objects.create(sweep=sweep, as_of=as_of)
    try:
        yield run
    except BaseException as exc:
        run.status = SweepRun.Status.FAILED
        run.error = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    else:
        if run.status == SweepRun.Status.RUNNING:
            run.status = SweepRun.Status.OK
    finally:
        run.finished_at = timezone.now()
        try:
            run.save(update_fields=["status", "finished_at", "counts", "error", "summary"])
        except DatabaseError:
            # The connection itself may be what failed; the run stays "running",
            # which health reports as a run that never finished.
            logger.exception("could not record the end of the %s run", sweep)
        logger.info(
            "sweep finished",
            extra={"sweep": sweep, "status": run.status, "counts": run.counts},
        )
