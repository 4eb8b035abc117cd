"""How long the test suite takes, side by side: two commits, the same machine, turn about.

``python -m bench.suite_time [--baseline REV] [--current REV] [--rounds N] [--json PATH]``

Each revision is cloned fresh into a temporary folder and gets what a fresh
machine gets: its own virtualenv installed from its own requirement files
(``requirements-dev.txt`` where the revision has one, else
``requirements.txt``) and its own embedded PostgreSQL in its ``var/``, started
once before any timing. Then the README's ``python -m pytest`` runs in each, in
the order baseline, current, current, baseline, … so that drift in the
machine's load falls on both alike. Reported: every run's wall time and pytest
summary, the mean per revision, and current / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIT = shutil.which("git") or "git"
ROOT = Path(__file__).resolve().parent.parent
# The last commit before the suite was made faster (issue: one home for each idea).
DEFAULT_BASELINE = "ae2d7dd"
STOP_EMBEDDED_SERVER = (
    "import pgserver; pgserver.pg_ctl(['stop', '-m', 'fast'], pgdata='var/pgdata')"
)
SUMMARY = re.compile(r"^=*\s*(\d+ passed.*) in [0-9.]+s", re.M)


def _environment() -> dict[str, str]:
    """The embedded default for both: no server URL, no inherited virtualenv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "VIRTUAL_ENV"))}
    env.pop("NUDGE_TEST_ADMIN_URL", None)
    return env


def prepare(rev: str, into: Path) -> Path:
    """A clean clone of ``rev`` with its own venv and a running embedded PostgreSQL."""
    subprocess.run([GIT, "clone", "-q", str(ROOT), str(into)], check=True)
    subprocess.run([GIT, "checkout", "-q", rev], cwd=into, check=True)
    requirements = "requirements-dev.txt"
    if not (into / requirements).exists():
        requirements = "requirements.txt"
    subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=into, check=True)
    subprocess.run([".venv/bin/pip", "install", "-q", "-r", requirements], cwd=into, check=True)
    # Starts (and initialises) the embedded server, so no timed run pays for it.
    subprocess.run(
        [".venv/bin/python", "manage.py", "check"], cwd=into, env=_environment(), check=True
    )
    return into


def time_suite(tree: Path) -> dict[str, object]:
    started = time.monotonic()
    done = subprocess.run(
        [".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tree,
        env=_environment(),
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    summary = SUMMARY.findall(done.stdout)
    return {
        "seconds": round(seconds, 1),
        "exit": done.returncode,
        "summary": summary[-1] if summary else done.stdout.strip().splitlines()[-1:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--current", default="HEAD")
    parser.add_argument("--rounds", type=int, default=1, help="ABBA pairs to run (default 1)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    revisions = {"baseline": args.baseline, "current": args.current}
    runs: dict[str, list[dict[str, object]]] = {"baseline": [], "current": []}
    with tempfile.TemporaryDirectory(prefix="nudge-suite-time-") as tmp:
        trees = {}
        for name, rev in revisions.items():
            print(f"preparing {name} ({rev}) …", flush=True)
            trees[name] = prepare(rev, Path(tmp) / name)
        order = ["baseline", "current", "current", "baseline"] * args.rounds
        for n, name in enumerate(order, 1):
            result = time_suite(trees[name])
            runs[name].append(result)
            print(f"[{n}/{len(order)}] {name}: {result['seconds']} s — {result['summary']}")
        for tree in trees.values():  # each clone's embedded server stops before removal
            subprocess.run(
                [".venv/bin/python", "-c", STOP_EMBEDDED_SERVER], cwd=tree, capture_output=True
            )

    means = {name: statistics.mean(r["seconds"] for r in results) for name, results in runs.items()}
    figures = {
        "revisions": revisions,
        "runs": runs,
        "mean_seconds": {name: round(value, 1) for name, value in means.items()},
        "current_over_baseline": round(means["current"] / means["baseline"], 3),
    }
    print(
        f"mean: baseline {means['baseline']:.0f} s, current {means['current']:.0f} s "
        f"(x{figures['current_over_baseline']})"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
