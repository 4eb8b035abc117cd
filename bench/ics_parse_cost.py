"""CPU per parsed ICS feed: a fork of the sweep per feed against a fork of the parse template.

``python -m bench.ics_parse_cost [--feeds 200] [--rounds 2]``

The bench process is made to look like the sweep whose feeds it parses: Django set
up, the sync and materialize modules imported, 70 idle threads (64 fetch threads
and 6 database lanes). In it, side by side and alternating round by round, each
feed is parsed ``--feeds`` times one after another

- **fork per feed**: the bounded parse as it was until this change (``f4ebbb3``,
  copied below): a ``multiprocessing`` fork of this process per feed;
- **template**: ``parse_template.parse_feed_bounded`` now, a fork per feed of the small
  warm template process (``providers/parse_template.py``);
- **in process**: ``parse_feed`` itself, warm, the floor (measured in a fork, so that
  this process stays as cold as the sweep, which never parses a feed itself).

CPU per feed counts every process involved: this process (``RUSAGE_SELF``), its
reaped children (the forks), and for the template its own CPU and its reaped
children's (read with psutil: they are not this process's children). Two feeds:
one event, and a Google-shaped export with daily and weekly RRULEs, EXDATEs, an
edited and a cancelled occurrence, alarms (``tests/calendars/ics_samples.FEED``).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import resource
import statistics
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil

from bench.calendar_sync import _ics_body
from bench.env import setup_django

IDLE_THREADS = 70
WINDOW = {
    "start": datetime(2026, 12, 1, tzinfo=UTC),
    "end": datetime(2026, 12, 9, tzinfo=UTC),
    "timezone": "Europe/Berlin",
}


def _fork_per_feed(body: bytes, **options: Any) -> Any:
    """``parse_feed_bounded`` as of ``f4ebbb3``: a fork of the calling process per feed."""
    from providers.base import MalformedPayload, ProviderError
    from providers.parse_template import parse_seconds

    seconds = options.pop("seconds", None) or parse_seconds(len(body))
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_parse_in_fork, args=(send, body, seconds, options))
    child.start()
    send.close()
    try:
        if not receive.poll(seconds + 0.5):
            raise MalformedPayload(f"ics: reading the feed took longer than {seconds:.0f}s")
        outcome = receive.recv()
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join()
    if isinstance(outcome, ProviderError):
        raise outcome
    return outcome


def _parse_in_fork(send: Any, body: bytes, seconds: float, options: dict[str, Any]) -> None:
    from providers.base import MalformedPayload, ProviderError
    from providers.ics_parse import parse_feed

    cpu = math.ceil(seconds) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        outcome: Any = parse_feed(body, **options)
    except ProviderError as exc:
        outcome = exc
    except Exception as exc:
        outcome = MalformedPayload(f"ics: cannot read the feed ({type(exc).__name__})")
    send.send(outcome)
    send.close()


def _cpu_seconds() -> tuple[float, float]:
    """CPU of this process, and of everything it had parse for it: its reaped children
    (the forks), the template and the template's reaped children."""
    from tests.support.parse_template import template_pid

    own, children = (
        usage.ru_utime + usage.ru_stime
        for usage in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )
    pid = template_pid()
    if pid is not None:
        times = psutil.Process(pid).cpu_times()
        children += times.user + times.system + times.children_user + times.children_system
    return own, children


def _per_feed(parse: Callable[..., Any], body: bytes, feeds: int) -> dict[str, float]:
    parse(body, **WINDOW)  # the template starts (once), caches warm
    time.sleep(0.3)  # the template reaps its child
    wall, (own, children) = time.monotonic(), _cpu_seconds()
    for _ in range(feeds):
        parse(body, **WINDOW)
    wall = time.monotonic() - wall
    time.sleep(0.3)
    own_after, children_after = _cpu_seconds()
    per_feed = {"parent": own_after - own, "others": children_after - children}
    return {
        "cpu_ms": round(sum(per_feed.values()) / feeds * 1000, 2),
        "parent_cpu_ms": round(per_feed["parent"] / feeds * 1000, 2),
        "child_cpu_ms": round(per_feed["others"] / feeds * 1000, 2),
        "wall_ms": round(wall / feeds * 1000, 2),
    }


def _in_process(body: bytes, feeds: int) -> dict[str, float]:
    """``parse_feed`` itself, warm, timed in a fork of this process (which stays cold)."""
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(
        target=_time_in_process, args=(send, body, feeds)
    )
    child.start()
    figures = receive.recv()
    child.join()
    return figures


def _time_in_process(send: Any, body: bytes, feeds: int) -> None:
    from providers.ics_parse import parse_feed

    parse_feed(body, **WINDOW)
    wall, cpu = time.monotonic(), time.process_time()
    for _ in range(feeds):
        parse_feed(body, **WINDOW)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    send.send({"cpu_ms": round(cpu / feeds * 1000, 2), "wall_ms": round(wall / feeds * 1000, 2)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    setup_django()
    import calendars.sync  # noqa: F401 — the sweep's modules, for its size
    import sweeps.materialize  # noqa: F401
    from providers.parse_template import parse_feed_bounded
    from tests.calendars.ics_samples import FEED
    from tests.support.parse_template import template_pid

    idle = threading.Event()
    for _ in range(IDLE_THREADS):
        threading.Thread(target=idle.wait, daemon=True).start()
    started = time.monotonic()
    parse_feed_bounded(b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n", **WINDOW)
    template = psutil.Process(template_pid())
    times = template.cpu_times()
    feeds = {
        "one event": _ics_body(WINDOW["start"] + timedelta(days=1)).encode(),
        "RRULEs (ics_samples.FEED)": FEED,
    }
    ways = {
        "fork per feed (f4ebbb3)": _fork_per_feed,
        "template": parse_feed_bounded,
    }
    results: dict[str, Any] = {
        "rss_mb": round(psutil.Process().memory_info().rss / 2**20),
        "threads": threading.active_count(),
        "template_rss_mb": round(template.memory_info().rss / 2**20),
        "template_start": {
            "wall_s": round(time.monotonic() - started, 2),
            "cpu_s": round(times.user + times.system, 2),
        },
        "load_before": os.getloadavg(),
        "feeds": {},
    }
    print(json.dumps(results), flush=True)
    names = [*ways, "in process"]
    runs: dict[str, dict[str, list[dict[str, float]]]] = {f: {w: [] for w in names} for f in feeds}
    for _ in range(args.rounds):
        for feed, body in feeds.items():
            for way in names:
                if way in ways:
                    figures = _per_feed(ways[way], body, args.feeds)
                else:
                    figures = _in_process(body, args.feeds)
                runs[feed][way].append(figures)
                print(json.dumps({"feed": feed, "way": way, **figures}), flush=True)
    for feed, by_way in runs.items():
        results["feeds"][feed] = {
            way: {key: round(statistics.median(r[key] for r in rounds), 2) for key in rounds[0]}
            for way, rounds in by_way.items()
        }
    results["load_after"] = os.getloadavg()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
