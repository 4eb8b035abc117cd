"""The apps' import graph has floors: an app imports only the floors below it.

Run alone with ``python -m pytest tests/test_layers.py``; the failure lists
every upward import (lazy ones inside functions too) with its file and line.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Ground floor first; docs/ARCHITECTURE.md ("Layers") says what each holds.
LAYERS = (
    "core",
    "tenancy",
    "pacing",
    "accounts",
    "providers",
    "calendars",
    "followups",
    "scheduled_sends",
    "messaging",
    "sweeps",
    "portal",
    "console",
    "nudgeproject",
)
FLOOR = {app: floor for floor, app in enumerate(LAYERS)}


def imports_between_apps() -> dict[tuple[str, str], list[str]]:
    """(importing app, imported app) -> where, for every import of one app by another."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for app in LAYERS:
        for path in sorted((ROOT / app).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    target = name.split(".")[0]
                    if target in FLOOR and target != app:
                        where = f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"
                        edges[(app, target)].append(where)
    return edges


def test_every_app_is_on_a_floor():
    apps = {p.parent.name for p in ROOT.glob("*/apps.py")}
    assert apps <= set(LAYERS), f"apps without a floor in LAYERS: {apps - set(LAYERS)}"


def test_no_app_imports_upward():
    upward = [
        where
        for (importer, imported), places in imports_between_apps().items()
        if FLOOR[imported] > FLOOR[importer]
        for where in places
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_two_apps_import_each_other():
    edges = imports_between_apps()
    pairs = sorted({tuple(sorted(pair)) for pair in edges if pair[::-1] in edges})
    assert not pairs, f"two-way pairs: {pairs}"


@pytest.mark.parametrize("app", LAYERS)
def test_the_check_sees_imports(app):
    """Not vacuous: every app but the ground floor imports something below it."""
    if app == "core":
        return
    assert any(importer == app for importer, _ in imports_between_apps())


def test_architectures_where_table_names_files_that_exist():
    """docs/ARCHITECTURE.md's "Where each idea lives" table matches the tree: every
    path it names (``a/{b,c}.py`` spelled out) exists."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Where each idea lives", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([a-z_]+/[A-Za-z0-9_/{},.*-]+)`", table)
    paths = []
    for path in named:
        if "{" in path:
            head, rest = path.split("{", 1)
            options, tail = rest.split("}", 1)
            paths += [head + option + tail for option in options.split(",")]
        else:
            paths.append(path)
    assert len(paths) > 40
    assert [p for p in paths if not (ROOT / p.rstrip("/")).exists()] == []


# Concurrency has one primitive (core/executor.py); the untrusted parse forks for isolation.
POOL_PRIMITIVES = re.compile(
    r"ThreadPoolExecutor|ProcessPoolExecutor|threading\.Thread\(|multiprocessing\.Pool"
    r"|os\.fork\(|asyncio\.to_thread|run_in_executor"
)
POOL_OWNERS = {"core/executor.py", "providers/parse_template.py"}


def test_one_pool_primitive():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for app in LAYERS
        for path in sorted((ROOT / app).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in POOL_OWNERS
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if POOL_PRIMITIVES.search(line)
    ]
    assert not found, "threads or forks outside core/executor.py:\n" + "\n".join(found)
