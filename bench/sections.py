"""One function per workload: its result as markdown (printed, and in BENCHMARKS.md)."""

from __future__ import annotations

from bench.env import median, p95
from bench.report import table


def idle(r: dict) -> str:
    rows = []
    for e in r["by_tenants"]:
        rows.append(
            [
                e["tenants"],
                median(e["claim_db_ms"]),
                median(e["claim_planning_ms"]),
                median(e["claim_execution_ms"]),
                median(e["claim_buffers"]),
                median(e["run_deliver_ms"]),
                e["naive_per_tenant_ms"],
                e["naive_full_sweep_ms"] / 1000,
                ("extrapolated from " + f"{e['naive_sampled_tenants']:,}")
                if e["naive_extrapolated"]
                else "measured, all",
                e["ratio_naive_over_ours"],
            ]
        )
    return (
        f"### 1-2. Idle minute vs tenants ({r['rows']:,} pending rows, all in the future; "
        f"medians of {r['reps']})\n\n"
        + table(
            [
                "tenants",
                "claim DB ms",
                "planning ms",
                "execution ms",
                "buffers",
                "run_deliver ms",
                "naive ms/tenant",
                "naive sweep s",
                "naive figure",
                "naive / ours",
            ],
            rows,
        )
        + f"\n\nClaim plan (CTE): {r['by_tenants'][-1]['claim_plan']}. "
        f"Largest/smallest tenant count: claim DB time x{r['db_ratio_last_over_first']:.2f}, "
        f"whole run x{r['run_ratio_last_over_first']:.2f} (target ≤ 1.5, claim < 1 ms).\n"
    )


def rls(r: dict) -> str:
    rows = [
        [case, median(r[case]["rls"]), median(r[case]["plain"]), r[case]["ratio"]]
        for case in ("idle", "batch")
    ]
    return (
        f"### 8. RLS overhead (claim under the bypass policy vs the same statement on a copy "
        f"without RLS; {r['rows']:,} rows, {r['due']:,} due; medians of {r['reps']}, "
        "interleaved)\n\n"
        + table(["claim", "with RLS (DB ms)", "copy without RLS (DB ms)", "ratio"], rows)
        + "\n"
    )


def bloat(r: dict) -> str:
    size_rows = [
        [name, r["index_bytes_before"][name] / 1024, r["index_bytes_after"][name] / 1024]
        for name in r["index_bytes_after"]
    ]
    lines = [
        f"### 7. Bloat: {r['settled_total']:,} rows settled in {r['waves']} waves "
        f"(VACUUM after each), {r['pending']:,} rows pending throughout\n",
        table(["index", "KiB before", "KiB after"], size_rows),
        "",
        "Size after each wave (KiB; the partial index plateaus once VACUUM has "
        "recycled the pages of settled waves, the primary key keeps growing):",
        "",
        table(
            ["wave", "settled so far", "due_idx KiB", "pkey KiB"],
            [[w["wave"], w["settled_so_far"], w["due_idx"], w["pkey"]] for w in r["per_wave_kib"]],
        ),
        "",
        f"Partial index per pending row: {r['due_idx_bytes_per_pending_before']:.1f} B before, "
        f"{r['due_idx_bytes_per_pending_after']:.1f} B after (pending rows then: "
        f"{r['pending_before']:,} / {r['pending_after']:,}).",
        "",
        table(
            ["claim of 200", "before (DB ms)", "after (DB ms)", "ratio after/before"],
            [
                [
                    "median",
                    median(r["claim_before_ms"]),
                    median(r["claim_after_ms"]),
                    r["claim_ratio"],
                ]
            ],
        ),
        "",
        f"`claimed_at` in an index (from pg_index: keys, expressions, predicates): "
        f"**{r['claimed_at_indexed']}**; indexes naming it: "
        f"{r['indexes_with_claimed_at'] or 'none'}.",
        "",
        table(
            ["phase", "rows", "n_tup_upd", "n_tup_hot_upd", "HOT share"],
            [
                [p["phase"], p["rows"], p["upd"], p["hot"], p["hot_share"]]
                for p in r["hot_phases"] + [r["hot_fillfactor_50"]]
            ],
        ),
        "",
        f"`manage.py prune_sends --older-than {r['prune_days']}`: deleted "
        f"{r['pruned']:,} rows in {r['prune_seconds']:.1f}s = "
        f"**{r['pruned'] / r['prune_seconds']:,.0f} rows/s** (whole process, start-up included).",
    ]
    return "\n".join(lines) + "\n"


def drain(r: dict) -> str:
    rows = []
    for e in r["rounds"]:
        rows.append(
            [
                e["workers"],
                e["settled"],
                e["seconds"],
                e["settled_per_second"],
                e["duplicates"],
                e["batches"],
                median(e["claim_ms"]),
                p95(e["claim_ms"]),
                max(e["claim_ms"]) if e["claim_ms"] else float("nan"),
            ]
        )
    return (
        f"### 3. Backlog drain: {r['rows']:,} due rows over {r['tenants']:,} tenants, "
        "separate `deliver` worker processes, recording channel\n\n"
        + table(
            [
                "workers",
                "settled",
                "seconds",
                "settled rows/s",
                "duplicates",
                "claims",
                "claim ms median",
                "claim ms p95",
                "claim ms max",
            ],
            rows,
        )
        + "\n\nDuplicates are counted from the recording file (lines minus distinct nudges); "
        "seconds run from the workers' common start to the last settle.\n"
    )


def fairness(r: dict) -> str:
    rows = [
        [
            e["workers"],
            e["others_last_sent_s"],
            e["others_median_sent_s"],
            e["burst_last_sent_s"],
            e["others_sent"],
            e["others_late"],
            e["expired"],
        ]
        for e in r["rounds"]
    ]
    return (
        f"### 6. Fairness: one tenant with {r['burst']:,} nudges at the same minute among "
        f"{r['others']:,} other tenants' nudges of that minute (burst queued first)\n\n"
        + table(
            [
                "workers",
                "last other tenant sent after s",
                "median other sent after s",
                "burst's last sent after s",
                "others sent",
                "others past grace",
                "expired",
            ],
            rows,
        )
        + f"\n\n{r['verdict']}\n"
    )


def materialize(r: dict) -> str:
    return (
        f"### 4. Materialise: {r['users']:,} users x {r['events']} events in the window\n\n"
        + table(
            ["run", "rows written", "seconds", "rows/s", "users/s"],
            [
                [
                    "first",
                    r["first"]["queued"],
                    r["first"]["seconds"],
                    r["first"]["rows_per_second"],
                    r["first"]["users_per_second"],
                ],
                [
                    "second (same window)",
                    r["second"]["queued"],
                    r["second"]["seconds"],
                    r["second"]["rows_per_second"],
                    r["second"]["users_per_second"],
                ],
            ],
        )
        + f"\n\nSecond/first time: **{r['second_over_first']:.2f}**. Seeding with "
        f"`seed_demo` took {r['seed_seconds']:.1f}s.\n"
    )


def peer(r: dict) -> str:
    rows = [[k, v["jobs"], v["seconds"], v["per_second"]] for k, v in r["figures"].items()]
    return (
        f"### 5. Peer queue: Procrastinate {r['version']} on the same server, "
        f"{r['jobs']:,} jobs\n\n" + table(["operation", "jobs", "seconds", "jobs/s"], rows) + "\n"
    )


def document(results: dict, raw_json: str) -> str:
    m = results["machine"]
    head = [
        "# BENCHMARKS — issue #7: O(rows due), not O(tenants)",
        "",
        "Made by `python -m bench` (see bench/README.md) from one "
        f"{results['mode']} run; {results['total_seconds']:.0f}s in all.",
        "",
        "## Machine and versions",
        "",
        table(
            ["what", "value"],
            [
                ["CPU", m["cpu"]],
                ["cores", m["cores"]],
                ["memory", f"{m['memory_gib']} GiB"],
                ["PostgreSQL", f"{m['postgres']} ({m['server']})"],
                [
                    "PostgreSQL settings",
                    ", ".join(f"{k}={v}" for k, v in m["postgres_settings"].items()),
                ],
                ["Python", m["python"]],
                ["Django", m["django"]],
                ["psycopg", m["psycopg"]],
                ["Procrastinate", m["procrastinate"]],
            ],
        ),
        "",
        "Timings on a shared 2-core machine are noisy: read the ratios (two things "
        "measured side by side in one run, medians of several repetitions), not the "
        "absolute numbers.",
        "",
        "## Results",
        "",
    ]
    body = []
    for name in ("idle", "drain", "materialize", "peer", "fairness", "bloat", "rls"):
        if name in results:
            body.append(globals()[name](results[name]))
    notes = results.get("notes_md", "")
    tail = ["", "## Raw figures", "", "```json", raw_json, "```", ""]
    return "\n".join(head) + "\n".join(body) + ("\n" + notes if notes else "") + "\n".join(tail)
