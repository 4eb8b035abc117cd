"""Issue 35: what the minute job (``sync_changed``) costs as live push connections grow.

``python -m bench.push_scale [--sizes 1000,10000] [--changed 0.01] [--jobs 3] [--sittings 3]
[--baseline REV] [--current REV] [--tag T] [--json PATH]``

Each version in its own freshly migrated database, driven through its own
``manage.py shell`` (``bench.sidebyside``'s ``Tree``), both in the same run,
baseline first in every sitting. Per size (the sizes grow in one database:
the users of the smaller size stay), Google connections with a live channel
are seeded set-based (as the server's superuser, past row-level security),
their channels expiring evenly over the next seven days so about
``size / 10,080`` are due for renewal a minute, as in steady state; then
``ANALYZE``. Then ``--jobs`` minute jobs in a row, a simulated minute apart
(the channels falling due as they would; leases on the real clock): before
each, ``--changed`` of the connections (1 %) get a genuine notification
through ``notifications.google`` (the endpoint's code, in process), then one
``run_sync_changed`` is timed. Counted per job: SQL statements (every
thread's cursor), wall seconds, requests at the fake Google (fetches, watch,
stop; answering without added latency), and the rows the job read by
sequential scans of the push work list and the connections table
(``pg_stat_user_tables``), which is where a cost in all connections would show.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.pacing import current_tree
from bench.sidebyside import ADMIN_URL, ROOT, Tree, baseline_tree

DEFAULT_BASELINE = "af04e2a"

# Run inside each version's ``manage.py shell``: seeds up to each size, runs the jobs,
# prints one JSON line per size.
SCRIPT = Path(__file__).with_name("push_scale_job.py")


def sitting(
    tree: Tree, sizes: list[int], changed: float, jobs: int, concurrency: int
) -> list[dict]:
    tree.fresh_database()
    extra = {"CALENDAR_SYNC_CONCURRENCY": str(concurrency)} if concurrency else {}
    out = tree.run(
        "shell",
        "-c",
        SCRIPT.read_text(),
        PUSH_SCALE=json.dumps({"sizes": sizes, "changed": changed, "jobs": jobs}),
        PUSH_SCALE_ADMIN=ADMIN_URL,
        LOG_LEVEL="ERROR",
        **extra,
    )
    return [
        json.loads(line[len("PUSH_SCALE ") :])
        for line in out.splitlines()
        if line.startswith("PUSH_SCALE ")
    ]


def summary(sittings: list[dict]) -> dict:
    """Per version and size, min / median / max over every job of every sitting."""
    out: dict = {}
    for label in ("baseline", "current"):
        for size_runs in zip(*(s[label] for s in sittings), strict=True):
            size = size_runs[0]["size"]
            jobs = [job for run in size_runs for job in run["jobs"]]
            figures = {}
            for key in ("seconds", "statements", "provider_calls"):
                values = sorted(job[key] for job in jobs)
                figures[key] = [values[0], statistics.median(values), values[-1]]
            for table in ("calendar_push_work", "calendar_connections"):
                values = sorted(job["seq_rows_read"].get(table, 0) for job in jobs)
                figures[f"seq_rows_read {table}"] = [
                    values[0],
                    statistics.median(values),
                    values[-1],
                ]
            figures["jobs"] = len(jobs)
            out.setdefault(label, {})[str(size)] = figures
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.push_scale", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--jobs", type=int, default=3, help="minute jobs per size")
    parser.add_argument("--sittings", type=int, default=3)
    parser.add_argument(
        "--concurrency", type=int, default=0, help="CALENDAR_SYNC_CONCURRENCY; 0: the default"
    )
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--current", default="", help="a commit to run instead of this checkout")
    parser.add_argument("--tag", default="_push_scale")
    parser.add_argument("--json", default=str(ROOT / "bench/history/push_scale.json"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {"args": vars(args), "sittings": []}
    target = Path(args.json)
    with (
        baseline_tree(args.baseline, args.tag) as baseline,
        current_tree(args.current, args.tag) as current,
    ):
        for number in range(args.sittings):
            one = {}
            for tree in (baseline, current):
                started = time.time()
                one[tree.label] = sitting(tree, sizes, args.changed, args.jobs, args.concurrency)
                print(
                    f"sitting {number + 1} {tree.label}: {time.time() - started:.0f} s", flush=True
                )
                print(json.dumps(one[tree.label]), flush=True)
            one["load_after"] = os.getloadavg()
            results["sittings"].append(one)
            results["summary"] = summary(results["sittings"])
            target.write_text(json.dumps(results, indent=1))
    print(json.dumps(results["summary"], indent=1))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
