"""The sweep's fetch pool: many users' calendars synced at once, by the
per-connection rules of ``calendars.sync``."""

from __future__ import annotations

import heapq
import itertools
import logging
import queue
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime

from calendars.sync import (
    ConnectionResult,
    FetchJob,
    Outcome,
    SyncSummary,
    fetch_job,
    internal_error,
    read_user_connections,
    write_job,
)
from core.config import NudgeConfig
from core.executor import Executor, inside_foreign_transaction
from pacing.host_slots import HostSlots
from pacing.pacer import one_connection
from providers import parse_template
from providers.base import BudgetExceeded, RetryLater

logger = logging.getLogger("nudge.calendars.sync")

# A throttled connection is fetched again in the same run, after its Retry-After, at
# most this many times, and only when that is this short (seconds); else next run.
IN_RUN_RETRIES = 3
IN_RUN_RETRY_WAIT = 30.0


def sync_user_connections(user_id: int, *, now: datetime, config: NudgeConfig) -> SyncSummary:
    """Sync every connection of ``user_id``, one after another on the calling thread;
    never raises per connection."""
    with SyncPool(now=now, config=config, concurrency=1) as pool:
        pool.add_user(user_id)
        return dict(pool.drain())[user_id]


@dataclass
class _UserSync:
    summary: SyncSummary = field(default_factory=SyncSummary)
    waiting: deque[FetchJob | ConnectionResult] = field(default_factory=deque)  # in order
    spent: float = 0.0  # seconds this user's fetches took, against their budget


Finished = tuple[int, SyncSummary]


class SyncPool:
    """Many users' connections fetched at once: up to ``CALENDAR_SYNC_CONCURRENCY``
    provider calls, to one feed host as many as it has earned (``pacing.host_slots``);
    each database step on one of ``CALENDAR_SYNC_DB_LANES`` lanes, in the owner's scope.
    One user's connections go one after another within their budget (then ``deferred``);
    past ``deadline`` (monotonic) nothing new starts. With ``concurrency=1``, or inside
    a transaction the pool does not own, all runs inline. Every connection is synced
    over the subjects' window at ``now`` (``subject_window``).
    """

    def __init__(
        self,
        *,
        now: datetime,
        config: NudgeConfig,
        concurrency: int | None = None,
        deadline: float | None = None,
    ) -> None:
        self.config = config
        self.now = now
        self.window = config.subject_window(now)
        self.concurrency = concurrency or config.calendar_sync_concurrency
        self.per_host = min(config.calendar_sync_per_host, self.concurrency)  # a new host's
        self.host_slots = HostSlots(self.per_host, self.concurrency)
        self.user_budget = config.calendar_sync_user_budget_seconds
        self.deadline = deadline
        self._users: dict[int, _UserSync] = {}
        self._ready: deque[int] = deque()  # users whose next connection may start
        self._parked: dict[str, deque[FetchJob]] = defaultdict(deque)  # waiting for their host
        self._per_host: Counter[str] = Counter()
        # Throttled jobs to fetch again: (monotonic instant, tie-break, job), soonest first.
        self._later: list[tuple[float, int, FetchJob]] = []
        self._order = itertools.count()
        self._in_flight = 0
        self._finished: deque[Finished] = deque()
        self._outbox: queue.SimpleQueue[tuple] = queue.SimpleQueue()  # (take, its args) to run
        threaded = self.concurrency > 1
        # Fetches touch the database only through pacing, on its one shared session.
        self._fetches = Executor(self.concurrency if threaded else 0, "sync", database=False)
        self._db = Executor(config.calendar_sync_db_lanes if threaded else 0, "sync-db")
        self._pacing = one_connection()
        self._parser_started = False

    def __enter__(self) -> SyncPool:
        self._pacing.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._fetches.close()
            self._db.close()
            self._share_host_slots(force=True)  # the last answers' lessons too
        finally:
            self._pacing.__exit__(None, None, None)

    def add_user(self, user_id: int, connection_ids: Collection[int] | None = None) -> None:
        """Queue the user: their connections (or only ``connection_ids``: what push
        said changed) are read on a lane, then fetched. Once until they are finished."""
        self._users[user_id] = _UserSync()
        args = (user_id, self.now, self.window, self.config, connection_ids)
        self._on_answer(self._db.submit(read_user_connections, *args), self._read, user_id)
        self._dispatch()

    def admit(self, user_id: int, connection_ids: Collection[int] | None = None) -> list[Finished]:
        """Add the user, then hand back the users finished so far, waiting for one
        while the pool holds twice its concurrency in users (every slot kept busy,
        no more held in memory)."""
        self.add_user(user_id, connection_ids)
        return self.finished(wait=len(self._users) >= 2 * self.concurrency)

    def finished(self, *, wait: bool = False) -> list[Finished]:
        """Users whose every connection is done, in the order they finished (one whose
        connections could not be read says why: ``unreadable``). With ``wait``, blocks
        until there is one while any is still going."""
        self._dispatch()
        self._collect(block=False)
        while wait and not self._finished and self._users:
            self._collect(block=True)
        done = list(self._finished)
        self._finished.clear()
        return done

    def drain(self) -> list[Finished]:
        """Wait for every user added; as ``finished``."""
        done = []
        while self._users or self._finished:
            done += self.finished(wait=True)
        return done

    def _dispatch(self) -> None:
        self._share_host_slots()
        while self._in_flight < self.concurrency:
            job = self._next_job()
            if job is None:
                return
            self._start(job)

    def _next_job(self) -> FetchJob | None:
        """A throttled job whose wait is over, a parked job whose host has room, else the
        next ready user's next connection."""
        while self._later and self._later[0][0] <= time.monotonic():
            job = heapq.heappop(self._later)[2]
            if self._past_deadline():
                self._write(job)  # as it failed: the run's time is spent
            elif job.host is not None and not self._host_has_room(job.host):
                self._parked[job.host].appendleft(job)
            else:
                return job
        for host, parked in self._parked.items():
            while parked and self._host_has_room(host):
                job = parked.popleft()
                user = self._users[job.user_id]
                if not self._out_of_time(user):
                    return job
                self._defer_rest(job.user_id, user, job)
        while self._ready:
            user_id = self._ready.popleft()
            user = self._users[user_id]
            job = user.waiting.popleft()
            if self._out_of_time(user):
                self._defer_rest(user_id, user, job)
                continue
            if isinstance(job, ConnectionResult):
                self._done(user_id, job)
                continue
            if job.snapshot is None:  # read, but nothing to fetch with (no secrets)
                self._write(job)
                continue
            if job.host is not None and not self._host_has_room(job.host):
                self._parked[job.host].append(job)
                continue
            return job
        return None

    def _host_has_room(self, host: str) -> bool:
        return self._per_host[host] < self.host_slots.limit(host)

    def _share_host_slots(self, *, force: bool = False) -> None:
        """What this process learned of hosts, shared (at most once a second); never
        inside a transaction the pool does not own (a test's), never fatal."""
        if inside_foreign_transaction():
            return
        try:
            self.host_slots.share(force=force)
        except Exception:  # the database hiccuped: go on with what this process knows
            logger.exception("could not share the feed hosts' learned slots")

    def _retry_at(self, job: FetchJob, user: _UserSync) -> float | None:
        """When to fetch a throttled job again in this run, or None: not throttled, its
        Retry-After too long, or past the run's or the user's budget."""
        error = job.error
        if not isinstance(error, RetryLater) or isinstance(error, BudgetExceeded):
            return None
        if error.retry_after is None or job.retries >= IN_RUN_RETRIES:
            return None
        wait = max(0.0, error.retry_after.total_seconds())
        at = time.monotonic() + wait
        if wait > IN_RUN_RETRY_WAIT or user.spent + wait >= self.user_budget:
            return None
        if self.deadline is not None and at >= self.deadline:
            return None
        return at

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _out_of_time(self, user: _UserSync) -> bool:
        return self._past_deadline() or user.spent >= self.user_budget

    def _defer_rest(
        self, user_id: int, user: _UserSync, first: FetchJob | ConnectionResult
    ) -> None:
        """Count ``first`` and the user's remaining connections deferred; finish the user."""
        budget = "the run's time" if self._past_deadline() else "the user's calendar sync"
        why = f"{budget} budget was spent; synced next run"
        for item in (first, *user.waiting):
            if isinstance(item, FetchJob):  # a result stands already: not to be fetched
                item = ConnectionResult(item.connection_id, item.provider, Outcome.DEFERRED, why)
            user.summary.add(item)
        user.waiting.clear()
        self._finish_user(user_id)

    def _start(self, job: FetchJob) -> None:
        job.error = None  # a throttled job's last answer: this attempt has its own
        self._in_flight += 1
        if job.host is not None:
            self._per_host[job.host] += 1
        self._on_answer(self._fetches.submit(fetch_job, job, self.now), self._fetched, job)

    def _on_answer(self, future: Future, take: Callable[..., None], *args: object) -> None:
        """Once ``future`` is done (on any thread), ``take(*args, future)`` runs here."""
        future.add_done_callback(lambda done: self._outbox.put((take, (*args, done))))

    def _collect(self, *, block: bool) -> None:
        """Take in what came back, then start what that made room for."""
        timeout = 1.0
        if self._later:
            timeout = min(timeout, max(0.01, self._later[0][0] - time.monotonic()))
        with suppress(queue.Empty):  # none came (a throttled job's wait may be over), or all taken
            answer = self._outbox.get(timeout=timeout) if block else self._outbox.get_nowait()
            while True:
                take, args = answer
                take(*args)
                answer = self._outbox.get_nowait()
        self._dispatch()

    def _fetched(self, job: FetchJob, _future: Future) -> None:
        self._in_flight -= 1
        user = self._users[job.user_id]
        user.spent += job.seconds
        if job.host is not None:
            self._per_host[job.host] -= 1
            limited = isinstance(job.error, RetryLater)
            self.host_slots.answered(job.host, seconds=job.seconds, limited=limited)
        retry_at = self._retry_at(job, user)
        if retry_at is None:
            self._write(job)
            return
        user.spent += retry_at - time.monotonic()  # the wait is the user's time too
        job.retries += 1
        heapq.heappush(self._later, (retry_at, next(self._order), job))

    def _read(self, user_id: int, future: Future) -> None:
        if (error := future.exception()) is not None:  # the user is failed; the sweep goes on
            self._users.pop(user_id)
            self._finished.append((user_id, SyncSummary(unreadable=error)))
            return
        read = future.result()
        user = self._users[user_id]
        user.waiting.extend(read)
        if not self._parser_started and any(isinstance(j, FetchJob) and j.host for j in read):
            # A feed to parse is coming: start the parser while its round trip runs.
            self._parser_started = True
            self._fetches.submit(parse_template.start)
        if read:
            self._ready.append(user_id)
        else:
            self._finish_user(user_id)

    def _written(self, job: FetchJob, future: Future) -> None:
        # A failed write (the database going away mid-write) is counted; the sweep goes on.
        error = future.exception()
        result = future.result() if error is None else internal_error(job.connection_id, error)
        self._done(job.user_id, result)

    def _write(self, job: FetchJob) -> None:
        self._on_answer(self._db.submit(write_job, job, self.now), self._written, job)

    def _done(self, user_id: int, result: ConnectionResult) -> None:
        """Log and count one connection's result; the user's next connection may start."""
        failed = result.outcome in (Outcome.FAILED, Outcome.NEEDS_REAUTH)
        logger.log(logging.WARNING if failed else logging.INFO, "calendar sync %s", result)
        user = self._users[user_id]
        user.summary.add(result)
        if user.waiting:
            self._ready.append(user_id)
        else:
            self._finish_user(user_id)

    def _finish_user(self, user_id: int) -> None:
        self._finished.append((user_id, self._users.pop(user_id).summary))
