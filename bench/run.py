"""``python -m bench [--quick] [--only idle,drain,…] [--no-report]``

Builds ``<name>_bench`` afresh from the template (see bench/env.py), runs the
workloads in order, prints a table per workload and writes
bench/history/bench-<date>.md, from which BENCHMARKS.md is edited by hand
(``--quick``: smaller sizes, writes bench/QUICK.md instead, not committed).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from bench import env

ROOT = Path(__file__).resolve().parent.parent
# Where a full run's markdown goes; BENCHMARKS.md is edited by hand from it.
REPORT = f"bench/history/bench-{time.strftime('%Y-%m-%d')}.md"


@dataclass(frozen=True)
class Sizes:
    tenants: tuple[int, ...]
    idle_rows: int
    naive_sample: int
    subjects_per_user: int
    reps: int
    drain_rows: int
    drain_tenants: int
    workers: tuple[int, ...]
    burst: int
    fairness_workers: tuple[int, ...]
    burst_others: int
    materialize_users: int
    materialize_events: int
    peer_jobs: int
    bloat_pending: int
    bloat_due: int
    bloat_waves: int
    bloat_wave_rows: int
    hot_claims: int
    rls_due: int


FULL = Sizes(
    tenants=(1_000, 10_000, 100_000),
    idle_rows=1_000_000,
    naive_sample=1_000,
    subjects_per_user=1,
    reps=7,
    drain_rows=4_000,
    drain_tenants=1_000,
    workers=(1, 2, 4),
    burst=5_000,
    fairness_workers=(2,),
    burst_others=1_000,
    materialize_users=3_000,
    materialize_events=20,
    peer_jobs=2_000,
    bloat_pending=100_000,
    bloat_due=10_000,
    bloat_waves=10,
    bloat_wave_rows=100_000,
    hot_claims=10_000,
    rls_due=10_000,
)
QUICK = Sizes(
    tenants=(100, 1_000, 10_000),
    idle_rows=100_000,
    naive_sample=300,
    subjects_per_user=2,
    reps=3,
    drain_rows=2_000,
    drain_tenants=500,
    workers=(1, 2),
    burst=500,
    fairness_workers=(1, 2),
    burst_others=100,
    materialize_users=300,
    materialize_events=20,
    peer_jobs=1_000,
    bloat_pending=10_000,
    bloat_due=2_000,
    bloat_waves=4,
    bloat_wave_rows=10_000,
    hot_claims=2_000,
    rls_due=2_000,
)
WORKLOADS = ("idle", "rls", "bloat", "drain", "fairness", "materialize", "peer")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {WORKLOADS}")
    parser.add_argument("--no-report", action="store_true", help="print only, write no file")
    parser.add_argument("--drain-rows", type=int, help="override the drain backlog size")
    parser.add_argument(
        "--json", metavar="PATH", help="with --no-report: still save the raw figures here"
    )
    parser.add_argument(
        "--report-from",
        metavar="JSON",
        help="only re-render the report (bench/history/bench-<date>.md) from saved figures",
    )
    args = parser.parse_args()
    if args.report_from:
        from bench import report

        results = json.loads(Path(args.report_from).read_text())
        target = ROOT / (REPORT if results["mode"] == "full" else "bench/QUICK.md")
        target.write_text(report.markdown(results))
        print(f"wrote {target.relative_to(ROOT)}")
        return
    only = [w for w in args.only.split(",") if w] or list(WORKLOADS)
    unknown = set(only) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    sizes = QUICK if args.quick else FULL
    if args.drain_rows:
        sizes = replace(sizes, drain_rows=args.drain_rows)

    started = time.perf_counter()
    env.setup_django()
    from bench import report

    with env.stage("bench database (from the template, migrated)"):
        database = env.create_bench_database()
    results: dict = {"mode": "quick" if args.quick else "full", "sizes": asdict(sizes)}
    results["machine"] = report.machine()
    with env.stage(f"{max(sizes.tenants):,} users with delivery settings and subjects"):
        users = _base_data(sizes)

    for name in WORKLOADS:
        if name not in only:
            continue
        module = __import__(f"bench.{name}", fromlist=["run"])
        results[name] = module.run(sizes, users)
        print(report.section(name, results[name]), flush=True)
    results["total_seconds"] = time.perf_counter() - started
    print(f"\nbench database: {database}; total {results['total_seconds']:.0f}s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    if not args.no_report:
        target = ROOT / (REPORT if not args.quick else "bench/QUICK.md")
        target.write_text(report.markdown(results))
        (ROOT / "bench" / "last_run.json").write_text(json.dumps(results, indent=1, default=str))
        print(f"wrote {target.relative_to(ROOT)}")


def _base_data(sizes: Sizes) -> list[int]:
    from bench import data

    users = data.make_users(max(sizes.tenants), prefix="bench-")
    data.add_delivery_settings(users)
    data.add_subjects(users, env.now(), sizes.subjects_per_user)
    for table in ("auth_user", "delivery_settings", "calendar_connections"):
        env.vacuum(table)
    env.vacuum("calendar_events")
    env.vacuum("follow_ups")
    return users
