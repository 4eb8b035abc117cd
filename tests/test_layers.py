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


# What talks to a calendar provider over the network. A portal view must never reach
# one: a person's change is recorded, and the minute job calls the provider.
CALENDAR_PROVIDER_CLIENTS = {
    "providers.google",
    "providers.microsoft",
    "providers.ics",
    "providers.caldav",
    "providers.untrusted_fetch",
    "providers.oauth",
    "calendars.sync",
    "calendars.sync_pool",
    "calendars.push.channels",
}


# Names a page may import from a client module: they make no request to a provider.
PURE_HELPERS = {
    # Reads webcal:// as https://, and vets an address (resolving its host name to
    # refuse private networks) before it is saved; the feed itself is not fetched.
    "providers.ics": {"feed_address", "check_feed_url"},
    # Records a new feed and asks the minute job to fetch it (beside the command
    # line's connect, which fetches at once and is not a page's).
    "calendars.connect": {"ConnectError", "add_ics_feed"},
    # Records a CalDAV account (its address vetted, as a feed's) for the minute job to
    # discover; narrows it to the calendars chosen; stores a new password. No request.
    "calendars.caldav_connect": {
        "PRESETS",
        "add_account",
        "choices_of",
        "choose_calendars",
        "renew_password",
    },
    # Which OAuth credentials this server has (settings only).
    "calendars.views": {"available"},
}


def _module_file(name: str) -> Path | None:
    for candidate in (
        ROOT / f"{name.replace('.', '/')}.py",
        ROOT / name.replace(".", "/") / "__init__.py",
    ):
        if candidate.exists():
            return candidate
    return None


def reachable_from(start: list[str]) -> dict[str, str | None]:
    """Project modules imported, directly or through others (lazy imports too): module ->
    by whom. An import of only :data:`PURE_HELPERS` from a module does not follow it."""
    seen: dict[str, str | None] = {}
    stack: list[tuple[str, str | None]] = [(name, None) for name in start]
    while stack:
        name, by = stack.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen[name] = by
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                stack += [(alias.name, name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = {alias.name for alias in node.names}
                if names <= PURE_HELPERS.get(node.module, set()):
                    continue
                stack.append((node.module, name))
                stack += [(f"{node.module}.{alias}", name) for alias in names]
    return seen


def test_no_portal_view_reaches_a_calendar_provider_client():
    portal = [f"portal.{path.stem}" for path in sorted((ROOT / "portal").glob("*.py"))]
    seen = reachable_from(portal)
    chains = []
    for client in sorted(CALENDAR_PROVIDER_CLIENTS & seen.keys()):
        chain, by = [client], seen[client]
        while by is not None:
            chain.append(by)
            by = seen[by]
        chains.append(" <- ".join(chain))
    assert not chains, "the portal reaches a provider client:\n" + "\n".join(chains)


def test_the_reach_check_sees_a_path():
    assert "providers.google" in reachable_from(["sweeps.sync_changed"])
