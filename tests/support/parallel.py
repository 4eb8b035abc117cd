"""The suite on several processes (pytest-xdist), loaded with ``-p`` from pyproject.toml.

Each worker has a test database of its own (pytest-django names it
``test_<name>_gw0``, ``test_<name>_gw1``, …, copied from the same template),
its own fake provider servers on ephemeral ports and its own ``manage.py``
children, which are given that worker's database (``tests/support/processes.py``). What the
workers still share is the PostgreSQL server itself, and a few tests change
what every database of a server sees:

* the roles' attributes and session defaults (``ALTER ROLE <sweeper> BYPASSRLS``,
  ``ALTER ROLE CURRENT_USER SET role``): while one is in force, every other
  connection of the login role — another worker's test included — would start
  in the wrong role or see the check report it;
* ``bootstrap`` on the probe roles of ``tests/test_bootstrap.py``, which every
  test there creates and drops under the same names.

Those modules run alone: a test in them waits until no other worker is inside
a test and holds every other worker back until it is done; all other tests run
side by side. A file lock does it (shared for the ordinary tests, exclusive for
those), with a gate in front so a waiting exclusive test is not overtaken by a
stream of shared ones. Without xdist, or with ``-n 0``, nothing is locked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:
    import fcntl
except ImportError:  # not POSIX: the suite runs on one process there (-n 0)
    fcntl = None

# Node id prefixes of the tests that change roles (server-wide state); see above.
SERVER_WIDE = (
    "tests/test_bootstrap.py::",
    "tests/test_least_privilege.py::",
)

# Past a few workers, more mostly add load: each creates and migrates a test
# database of its own, and the tests that pace real sends by the clock need a
# core when they ask for one (on two cores, a third worker made one miss its slots).
MAX_WORKERS = 4

_lock_files: dict[str, int] = {}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker a core this process may use, at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def _lock_file(config: pytest.Config, name: str) -> int:
    if name not in _lock_files:
        # The checkout's state folder (git-ignored): every worker of a run sees it.
        folder = config.rootpath / "var"
        folder.mkdir(exist_ok=True)
        path = Path(folder, f"tests-{name}.lock")
        _lock_files[name] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    return _lock_files[name]


def _alone(item: pytest.Item | None) -> bool:
    return item is not None and item.nodeid.startswith(SERVER_WIDE)


def _take(config: pytest.Config, *, alone: bool) -> None:
    """Take the run lock, shared or (``alone``) exclusive, behind the gate."""
    gate, run = _lock_file(config, "gate"), _lock_file(config, "run")
    fcntl.flock(gate, fcntl.LOCK_EX)
    try:
        fcntl.flock(run, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    finally:
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
    _held.append(alone)


def _release(config: pytest.Config) -> None:
    alone = _held.pop()
    fcntl.flock(_lock_file(config, "run"), fcntl.LOCK_UN)
    if alone:
        fcntl.flock(_lock_file(config, "gate"), fcntl.LOCK_UN)


_held: list[bool] = []  # what this worker holds now: [] or [alone]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Set-up, call and teardown of each test inside its turn (xdist workers only).

    Consecutive tests that run alone keep the exclusive lock between them, so
    the other workers are waited for once, not before each of them.
    """
    if fcntl is None or not os.environ.get("PYTEST_XDIST_WORKER"):
        return (yield)
    alone = _alone(item)
    if _held and _held[0] != alone:
        _release(item.config)
    if not _held:
        _take(item.config, alone=alone)
    try:
        return (yield)
    finally:
        if not (alone and _alone(nextitem)):
            _release(item.config)
