"""Where an ICS feed is parsed: a fresh child per feed, forked from a small warm template.

A child, because a rule that can never match burns CPU inside one dateutil call: only
RLIMIT_CPU and a kill stop it. A template, because forking the large, threaded sweep costs
far more than the parse; it is exec'd with a bare environment, so it holds none of the
sweep's secrets (no database address, no keys). A fresh child per feed, never a reused
worker: icalendar caches a VTIMEZONE by its TZID, so one tenant's definition would change
how another tenant's times are read.

Per feed the parent passes the template (over a SOCK_SEQPACKET ``control`` pair) one end of
a new socket pair; the template forks a child that says it started, reads the request (the
feed and its wall deadline), parses under RLIMIT_CPU and an alarm at that deadline (SIGALRM's
default action ends it), and answers with the outcome and its log records. The template
reaps its children, so their CPU counts as its own. A dead or stuck template is replaced,
and the feed tried once more on the new one.
"""

from __future__ import annotations

import logging
import logging.handlers
import math
import multiprocessing.util
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

from providers.base import FetchResult, MalformedPayload, ProviderError

# The parse's CPU seconds: about twice the worst case (every event a series, so nothing is
# dropped unparsed).
PARSE_SECONDS_BASE = 2.0
PARSE_SECONDS_PER_MB = 4.0
START_SECONDS = 30.0  # wall clock for a new template to import and warm up
WALL_GRACE_SECONDS = 0.5
_READY = b"R"  # the template is ready, a feed is passed, its child started
_ROOT = str(Path(__file__).resolve().parents[1])
# The only environment the template gets: what the interpreter needs and what decides zones.
PASSED_ENVIRONMENT = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LD_LIBRARY_PATH",
    "PYTHONHOME",
    "PYTHONTZPATH",
    "TZ",
    "TZDIR",
)
_MODULE = "providers.parse_template"


class _TemplateLost(Exception):
    """The template did not take a feed, or took it but never started its child (it died
    meanwhile, or hangs)."""


# --- the parent's side -------------------------------------------------------------------------


class _Template:
    """The parent's handle on its running template process."""

    def __init__(self) -> None:
        self.control, template_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = f"import {_MODULE} as t; t.serve({template_end.fileno()})"
        try:
            self.process = subprocess.Popen(  # noqa: S603 — our interpreter, our code
                [sys.executable, "-c", code],
                pass_fds=[template_end.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={
                    **{name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ},
                    "PYTHONPATH": os.pathsep.join(
                        filter(None, [_ROOT, os.environ.get("PYTHONPATH", "")])
                    ),
                },
                cwd=_ROOT,
            )
        finally:
            template_end.close()
        self.control.settimeout(START_SECONDS)
        try:
            ready = self.control.recv(1)
        except OSError:
            ready = b""
        if ready != _READY:
            self.close()
            raise ProviderError("ics: the parse process did not start")
        self.control.settimeout(None)
        # Reaped at exit so its CPU counts as its parent's: multiprocessing's exit hook runs
        # in the main process at exit and in a multiprocessing child, which skips atexit.
        multiprocessing.util.Finalize(None, stop_template, exitpriority=0)

    def usable(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """Closing its socket ends the template; reap it."""
        self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_lock = threading.Lock()
_template: _Template | None = None


def _running() -> _Template:
    """This process's template, started anew if it has none or it died (under ``_lock``)."""
    global _template
    if _template is not None and not _template.usable():
        _template.close()
        _template = None
    if _template is None:
        _template = _Template()
    return _template


def _send(feed: socket.socket) -> _Template:
    with _lock:
        template = _running()
        try:
            socket.send_fds(template.control, [_READY], [feed.fileno()])
            return template
        except OSError:  # it died since the check
            pass
    _forget(template)
    raise _TemplateLost


def _forget(template: _Template, *, kill: bool = False) -> None:
    """Stop using ``template``; ``kill`` for one that no longer answers its socket."""
    global _template
    with _lock:
        if template is _template:
            _template = None
            if kill and template.usable():
                template.process.kill()  # its children still end at their deadline
            template.close()


def start() -> None:
    """Have this process's template running, so the first feed fetched does not wait the
    template's start-up on top of its own round trip."""
    with _lock:
        _running()


def stop_template() -> None:
    if _template is not None:
        _forget(_template)


def _after_fork_in_child() -> None:
    """A forked copy of the parent must not use (nor reap) the parent's template, nor its
    lock."""
    global _lock, _template
    _lock = threading.Lock()
    if _template is not None:
        _template.control.close()
        _template = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def parse_seconds(size: int) -> float:
    return PARSE_SECONDS_BASE + PARSE_SECONDS_PER_MB * size / 1_000_000


def parse_feed_bounded(body: bytes | list[str], **options: Any) -> FetchResult:
    """``ics_parse.parse_feed`` of ``body`` in a fresh child with ``parse_seconds`` of CPU
    (at most ``seconds``), ended ``WALL_GRACE_SECONDS`` later by the wall clock; ``options``
    travel pickled (tuples, not generators). MalformedPayload when it took too long or
    died; the parse's own ProviderError as raised."""
    size = len(body) if isinstance(body, bytes) else sum(map(len, body))
    seconds = min(parse_seconds(size), options.pop("seconds", math.inf))
    try:
        outcome, records = _exchange(body, seconds, options)
    except _TemplateLost:  # once more, on a new template
        try:
            outcome, records = _exchange(body, seconds, options)
        except _TemplateLost:
            raise ProviderError(
                "ics: the parse process died or hung before the feed was read"
            ) from None
    for record in records:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)
    if isinstance(outcome, ProviderError):
        raise outcome
    return outcome


def _exchange(
    body: bytes | list[str], seconds: float, options: dict[str, Any]
) -> tuple[Any, list[logging.LogRecord]]:
    ours, theirs = socket.socketpair()
    with Connection(ours.detach()) as child:
        with theirs:
            template = _send(theirs)
        deadline = time.monotonic() + seconds + WALL_GRACE_SECONDS
        try:
            if not child.poll(deadline - time.monotonic()):
                # No feed is to blame: the template is stuck. Replace it, or every later
                # feed would wait out its deadline and be blamed.
                _forget(template, kill=True)
                raise _TemplateLost
            child.recv_bytes()  # it started
        except EOFError:
            try:
                template.process.wait(timeout=1.0)  # a moment to finish dying
            except subprocess.TimeoutExpired:
                raise ProviderError("ics: the parse process could not start a child") from None
            _forget(template)
            raise _TemplateLost from None
        try:
            child.send((body, seconds, deadline, options))
            if child.poll(max(deadline - time.monotonic(), 0)):
                return child.recv()
        except (EOFError, ConnectionError):  # ended by its CPU limit or alarm, or out of memory
            if time.monotonic() < deadline:
                raise MalformedPayload(
                    f"ics: reading the feed took longer than {seconds:.0f}s of CPU"
                ) from None
        raise MalformedPayload(f"ics: reading the feed took longer than {seconds:.0f}s")


# --- the template's side -----------------------------------------------------------------------


def serve(control_fd: int) -> None:
    """The template's loop: fork a child per feed; exit at EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the template ends
    signal.signal(signal.SIGCHLD, _reap)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a child killed at its limit dumps no feed
    control = socket.socket(fileno=control_fd)
    from providers import ics_parse

    logging.getLogger("nudge").addHandler(logging.NullHandler())
    _warm_up(ics_parse)
    control.send(_READY)
    while True:
        message, fds, _, _ = socket.recv_fds(control, 1, 1)
        if not message:
            return  # the parent is gone
        with socket.socket(fileno=fds[0]) as feed:
            try:
                pid = os.fork()
            except OSError:
                continue  # the parent sees the feed's socket close unstarted
            if pid == 0:
                _child(feed, control)


def _warm_up(ics_parse: Any) -> None:
    """Parse ``warm_up.ics`` (with and without X-WR-TIMEZONE) before the template is ready, so
    its children start with lazy imports done and caches filled. Its VTIMEZONE's TZID is one
    no feed uses, as a definition is cached by TZID into every child."""
    feed = Path(__file__).with_name("warm_up.ics").read_bytes().replace(b"\n", b"\r\n")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    window = {
        "start": start,
        "end": start + timedelta(days=14),
        "meeting_hosts": ("meet.example.com",),
    }
    ics_parse.parse_feed(feed, addresses=("me@warm-up.invalid",), **window)
    without_zone = feed.replace(b"X-WR-TIMEZONE:Europe/Berlin\r\n", b"")
    ics_parse.parse_feed(without_zone, timezone="Europe/Berlin", **window)


def _reap(*_signal: object) -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass  # none left


def _child(feed: socket.socket, control: socket.socket) -> NoReturn:
    """One feed: say so, read the request, limit the CPU and the wall clock, parse, answer."""
    from providers import ics_parse

    code = 0
    try:
        control.close()
        parent = Connection(feed.detach())
        parent.send_bytes(_READY)
        body, seconds, deadline, options = parent.recv()
        cpu = math.ceil(seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.001))
        records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        nudge = logging.getLogger("nudge")
        nudge.handlers = [logging.handlers.QueueHandler(records)]
        nudge.setLevel(logging.DEBUG)
        try:
            outcome: FetchResult | ProviderError = ics_parse.parse_feed(body, **options)
        except ProviderError as exc:
            outcome = exc
        except Exception as exc:  # a bug must come back as a message, not a silent child
            outcome = MalformedPayload(f"ics: cannot read the feed ({type(exc).__name__})")
        parent.send((outcome, [records.get() for _ in range(records.qsize())]))
    except BaseException:
        code = 1
    finally:
        os._exit(code)
