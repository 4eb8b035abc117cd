"""The one way this project runs work concurrently: a bounded set of worker threads.
An executor of ``threads=0``, or one whose work touches the database while the caller
is inside a transaction (a test's), runs each call inline: another thread's
connection could not see that transaction's rows.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections

T = TypeVar("T")


def inside_foreign_transaction() -> bool:
    return connections[DEFAULT_DB_ALIAS].in_atomic_block


class Executor:
    """At most ``threads`` calls at once, on worker threads started on demand; each closes
    its database connections when the executor closes."""

    def __init__(self, threads: int, name: str, *, database: bool = True) -> None:
        self.name = name
        self.inline = threads <= 0 or (database and inside_foreign_transaction())
        self.threads = 0 if self.inline else threads
        self._inbox: queue.SimpleQueue[tuple[Future, Callable, tuple] | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._busy = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a worker (or inline); the future holds its answer or error."""
        future: Future[T] = Future()
        if self.inline:
            _run(future, fn, args)
            return future
        with self._lock:
            self._busy += 1
            if len(self._workers) < min(self._busy, self.threads):
                self._workers.append(spawn(f"{self.name}-{len(self._workers)}", self._work))
        self._inbox.put((future, fn, args))
        return future

    def close(self) -> None:
        """Let queued calls finish, then stop every worker."""
        for _worker in self._workers:
            self._inbox.put(None)
        for worker in self._workers:
            worker.join()
        self._workers.clear()

    def _work(self) -> None:
        try:
            while (item := self._inbox.get()) is not None:
                future, fn, args = item
                _run(future, fn, args)
                with self._lock:
                    self._busy -= 1
        finally:
            connections.close_all()  # this worker's own connections


def _run(future: Future, fn: Callable, args: tuple) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(fn(*args))
    except BaseException as exc:  # the caller reads it from the future
        future.set_exception(exc)


def spawn(name: str, target: Callable[..., object], *args: object) -> threading.Thread:
    """One long-lived daemon thread (an event loop, an executor's worker), started."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    return thread


@contextmanager
def thread_body(log: logging.Logger, failure: str) -> Iterator[None]:
    """The body of a one-off thread (a mail sent after the response): an error is logged
    to ``log`` as ``failure``, and the thread's connections are closed."""
    try:
        yield
    except Exception:
        log.exception(failure)
    finally:
        connections.close_all()  # this thread's own connections
