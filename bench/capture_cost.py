"""What reading a follow-up typed in a chat costs, and what it does not cost delivery.

``python -m bench.capture_cost [--sittings 3] [--baseline af04e2a] [--json PATH]``

Each sitting runs fresh processes (cold imports every time):

- **dateparser import**: ``import dateparser`` alone, the cost the first capture in a
  process pays (``followups.capture`` imports it on first use);
- **first capture**: ``capture.parse("in 2 hours check the oven")`` once in a process
  with Django set up, dateparser's import and language data included;
- **warm capture**: the median per phrase over the 77 phrases of the table test
  (``tests/followups/test_capture_phrases.py``), read 20 times each in the same process,
  and over the relative ones alone (the phrases dateparser reads: "in 2 hours", …);
- **deliver's imports**: ``import sweeps.management.commands.deliver`` after Django's
  set-up, this checkout and the baseline commit side by side (``git archive`` of it in a
  temporary directory), with whether ``dateparser`` was loaded (it must not be).

Nothing touches the database. Prints the figures; with ``--json`` also writes them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIT = shutil.which("git") or "git"

IMPORT_DATEPARSER = """
import time
t = time.perf_counter()
import dateparser
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

FIRST_CAPTURE = """
from bench.env import setup_django
setup_django()
from datetime import UTC, datetime
from followups import capture
t = time.perf_counter()
capture.parse("in 2 hours check the oven", "en", "Europe/Berlin",
              datetime(2026, 12, 3, 14, tzinfo=UTC))
print(json.dumps({"seconds": time.perf_counter() - t}))
"""

WARM_CAPTURE = """
from bench.env import setup_django
setup_django()
import statistics
from followups import capture
from tests.followups.test_capture_phrases import ASKS_BACK, CAPTURES, NOW
phrases = [(p[0], p[1], p[2]) for p in CAPTURES + ASKS_BACK]
for language, zone, phrase in phrases:
    capture.parse(phrase, language, zone, NOW)
per_phrase, relative = [], []
for language, zone, phrase in phrases:
    t = time.perf_counter()
    for _ in range(20):
        capture.parse(phrase, language, zone, NOW)
    per_phrase.append((time.perf_counter() - t) / 20)
    if capture._RELATIVE.search(capture.fold(phrase)):
        relative.append(per_phrase[-1])
print(json.dumps({"seconds": statistics.median(per_phrase),
                  "relative": statistics.median(relative), "phrases": len(phrases)}))
"""

DELIVER_IMPORTS = """
import os
import shutil
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "nudgeproject.settings")
import django
django.setup()
t = time.perf_counter()
import sweeps.management.commands.deliver
print(json.dumps({"seconds": time.perf_counter() - t,
                  "dateparser_loaded": "dateparser" in sys.modules}))
"""


def _run(code: str, cwd: Path) -> dict:
    env = {**os.environ, "LOG_LEVEL": "WARNING", "PYTHONPATH": str(cwd)}
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, time\n" + code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _baseline_tree(commit: str, into: Path) -> Path:
    archive = subprocess.run(
        [GIT, "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def _spread(values: list[float], scale: float) -> dict[str, float]:
    return {
        "min": round(min(values) * scale, 3),
        "median": round(statistics.median(values) * scale, 3),
        "max": round(max(values) * scale, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument("--baseline", default="af04e2a")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    figures: dict[str, list] = {
        "import_ms": [],
        "first_ms": [],
        "warm_us": [],
        "warm_relative_us": [],
        "deliver_ms": [],
        "deliver_baseline_ms": [],
        "deliver_loads_dateparser": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _baseline_tree(args.baseline, Path(tmp))
        for _ in range(args.sittings):
            figures["import_ms"].append(_run(IMPORT_DATEPARSER, ROOT)["seconds"])
            figures["first_ms"].append(_run(FIRST_CAPTURE, ROOT)["seconds"])
            warm = _run(WARM_CAPTURE, ROOT)
            figures["warm_us"].append(warm["seconds"])
            figures["warm_relative_us"].append(warm["relative"])
            # Side by side: this checkout, then the baseline, each cold.
            current = _run(DELIVER_IMPORTS, ROOT)
            figures["deliver_ms"].append(current["seconds"])
            figures["deliver_loads_dateparser"].append(current["dateparser_loaded"])
            figures["deliver_baseline_ms"].append(_run(DELIVER_IMPORTS, baseline)["seconds"])
    result = {
        "baseline": args.baseline,
        "sittings": args.sittings,
        "dateparser_import_ms": _spread(figures["import_ms"], 1e3),
        "first_capture_ms": _spread(figures["first_ms"], 1e3),
        "warm_capture_median_us": _spread(figures["warm_us"], 1e6),
        "warm_capture_relative_median_us": _spread(figures["warm_relative_us"], 1e6),
        "deliver_import_ms": _spread(figures["deliver_ms"], 1e3),
        "deliver_import_baseline_ms": _spread(figures["deliver_baseline_ms"], 1e3),
        "deliver_loads_dateparser": any(figures["deliver_loads_dateparser"]),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
