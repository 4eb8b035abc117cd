"""The top-of-the-hour benchmarks, side by side: the same workloads, two versions of the code.

``python -m bench.sidebyside [--baseline REV] [--only latency,rate,drain,fairness,materialize]
[--json PATH]``

The baseline is another commit of this repository (by default the one before
the concurrent delivery pipeline), checked out in a temporary git worktree;
"current" is this checkout. Both run as separate ``manage.py`` processes
against their own freshly bootstrapped database on one PostgreSQL server
(``NUDGE_BENCH_ADMIN_URL``, default the local server's superuser), so they
share the machine, the server and the fake providers' code, and differ only
in the code under test. Data is written through each version's own ORM and
tenant scopes (``manage.py shell``), nudges are queued by each version's
``materialize`` and sent by its ``deliver``, at the real clock. The fake
Telegram Bot API (tests/fakes) answers with a round-trip latency and, where
the workload is about rate limits, with Telegram's flood control (429 +
``retry_after``); what arrives there, and when, is the measurement.

Figures are printed and written as JSON; the markdown section goes to
``bench/history/sidebyside-<date>.md``, from which BENCHMARKS.md is edited by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

GIT = shutil.which("git") or "git"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Where the rendered section goes; BENCHMARKS.md is edited by hand from it.
REPORT = f"bench/history/sidebyside-{time.strftime('%Y-%m-%d')}.md"

from bench.worker import start_released  # noqa: E402
from tests.fakes.telegram_server import BOT_TOKEN, FakeTelegram  # noqa: E402
from tests.support.processes import with_tuning  # noqa: E402

ADMIN_URL = os.environ.get("NUDGE_BENCH_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
# The commit before the concurrent delivery pipeline: sequential sends, two
# commits per row, the first 429 pausing the channel for the rest of the run.
DEFAULT_BASELINE = "17adfe7"
WORKLOADS = ("latency", "rate", "drain", "fairness", "materialize")
LEAD = timedelta(minutes=10)  # every seeded user's default lead
RECORDING = "tests.support.recording.RecordingChannel"

# Seeds users, settings and follow-ups through the version's own ORM, each
# user inside their own tenant scope: the same code in every version.
SEED = """
import json, os
from datetime import datetime, timedelta
from django.contrib.auth import get_user_model
try:
    from followups.models import FollowUp
except ImportError:  # a baseline from before follow-ups had a room of their own
    from calendars.models import FollowUp
try:
    from accounts.models import DeliverySettings
except ImportError:  # a baseline from before accounts owned it
    from scheduled_sends.models import DeliverySettings
from tenancy.scope import tenant_scope
User = get_user_model()
for group in json.loads(os.environ["SBS_SEED"]):
    first = datetime.fromisoformat(group["due_at"])
    spread = timedelta(seconds=group["spread_seconds"])
    users = User.objects.bulk_create(
        [User(username=f"{group['prefix']}{i}") for i in range(group["users"])], batch_size=2000
    )
    for i, user in enumerate(users):
        with tenant_scope(user.pk):
            DeliverySettings.objects.create(
                user=user, channel=group["channel"], default_lead_minutes=10,
                telegram_chat_id=str(group["chat_base"] + i),
            )
            FollowUp.objects.bulk_create([
                FollowUp(user=user, title=f"{group['prefix']}{i}-{j}",
                         due_at=first + spread * j / max(1, group["per_user"]))
                for j in range(group["per_user"])
            ])
"""


def _seed_group(prefix: str, users: int, per_user: int, due_at: datetime, **extra) -> dict:
    return {
        "prefix": prefix,
        "users": users,
        "per_user": per_user,
        "due_at": due_at.isoformat(),
        "spread_seconds": extra.get("spread_seconds", 0),
        "channel": extra.get("channel", "telegram"),
        "chat_base": extra.get("chat_base", 1_000_000),
    }


@dataclass
class Tree:
    """One version of the code and its own database."""

    label: str
    path: Path
    # Distinguishes the databases of runs going on at once (``--tag``).
    tag: str = ""
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(40))

    @property
    def database(self) -> str:
        return f"nudge_sbs_{self.label}{self.tag}"

    def url(self) -> str:
        admin = psycopg.conninfo.conninfo_to_dict(ADMIN_URL)
        host = admin.get("host", "127.0.0.1")
        port = admin.get("port", "5432")
        return f"postgres://{self.database}@{host}:{port}/{self.database}"

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.url(),
            SECRET_KEY=self.secret_key,
            DJANGO_SETTINGS_MODULE="nudgeproject.settings",
            LOG_LEVEL="WARNING",
            PYTHONPATH=str(self.path),
        )
        env.update(extra)
        return with_tuning(env)

    def command(self, *args: str) -> list[str]:
        return [sys.executable, str(self.path / "manage.py"), *args]

    def run(self, *args: str, **env: str) -> str:
        done = subprocess.run(
            self.command(*args),
            cwd=self.path,
            env=self.env(**env),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"{self.label}: manage.py {' '.join(args)} failed:\n{done.stderr}")
        return done.stdout

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(*args),
            cwd=self.path,
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def fresh_database(self) -> None:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            for name in (self.database, f"{self.database}_template"):
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self.run("bootstrap_db", "--admin-url", ADMIN_URL)
        self.run("migrate", "-v0")

    def seed(self, *groups: dict) -> None:
        self.run("shell", "-c", SEED, SBS_SEED=json.dumps(list(groups)))

    def materialize(self, at: datetime, *args: str, **env: str) -> float:
        out = self.run("materialize", "--now", at.isoformat(), "--no-sync", *args, **env)
        return float(re.search(r" in ([0-9.]+)s", out)[1])

    def outcomes(self) -> dict[str, int]:
        """Queue rows per outcome, read as the server's superuser (no tenant scope)."""
        with psycopg.connect(ADMIN_URL, dbname=self.database) as admin:
            rows = admin.execute(
                "SELECT coalesce(outcome, 'pending'), count(*) FROM scheduled_sends GROUP BY 1"
            ).fetchall()
        return dict(rows)

    def database_now(self) -> datetime:
        with psycopg.connect(ADMIN_URL, dbname=self.database) as admin:
            return admin.execute("SELECT statement_timestamp()").fetchone()[0]


@contextmanager
def baseline_tree(rev: str, tag: str = "") -> Iterator[Tree]:
    with tempfile.TemporaryDirectory(prefix="nudge-baseline-") as tmp:
        path = Path(tmp) / "tree"
        subprocess.run(
            [GIT, "worktree", "add", "--detach", "-q", str(path), rev], cwd=ROOT, check=True
        )
        try:
            yield Tree("baseline", path, tag)
        finally:
            subprocess.run([GIT, "worktree", "remove", "--force", str(path)], cwd=ROOT)


def _telegram_env(fake: FakeTelegram, **extra: str) -> dict[str, str]:
    return {
        "TELEGRAM_API_BASE_URL": fake.base_url,
        "TELEGRAM_BOT_TOKEN": BOT_TOKEN,
        "CHANNEL_TIMEOUT_SECONDS": "10",
        **extra,
    }


def _summary(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=900)
    if process.returncode:
        raise RuntimeError(f"deliver failed:\n{out}\n{err[-3000:]}")
    return out.strip()


def _lateness(fake: FakeTelegram, intended_of: dict[str, float]) -> list[float]:
    """Per delivered message, seconds after its intended instant (negative: early)."""
    late = []
    for delivered in fake.delivered:
        # "… is due at 23:58" or, past midnight on the person's clock, "… is due tomorrow at 00:01".
        title = delivered.text.split(" is due ")[0].removeprefix("Reminder: ")
        if title in intended_of:
            late.append(delivered.at - intended_of[title])
    return late


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


# --- workloads ------------------------------------------------------------------------


def latency(tree: Tree, rows: int, provider_latency: float) -> dict:
    """``rows`` nudges due in one minute, a provider that answers in ``provider_latency``:
    how many one 60-second ``deliver`` run sends."""
    tree.fresh_database()
    now = tree.database_now()
    tree.seed(_seed_group("lat", rows, 1, now + LEAD - timedelta(seconds=30)))
    tree.materialize(now)
    with FakeTelegram(latency=provider_latency) as fake:
        env = _telegram_env(
            fake,
            NUDGE_RUN_BUDGET_SECONDS="60",
            NUDGE_LEASE_SECONDS="300",
            NUDGE_TELEGRAM_RATE="1000",  # isolate concurrency from pacing
        )
        started = time.monotonic()
        summary = _summary(tree.start("deliver", **env))
        seconds = time.monotonic() - started
        delivered = len(fake.delivered)
        duplicates = delivered - len({d.text for d in fake.delivered})
    return {
        "rows": rows,
        "provider_latency_s": provider_latency,
        "sent_in_one_run": delivered,
        "seconds": seconds,
        "rows_per_second": delivered / seconds,
        "duplicates": duplicates,
        "summary": summary,
    }


def rate(trees: list[Tree], rows: int, provider_rate: int, configured_rate: float) -> dict:
    """``rows`` nudges meant for one minute, a provider allowing ``provider_rate``/s with
    429 + retry_after above it; ``deliver`` every minute as cron would, both versions at
    once (each with its own fake and database)."""
    window = {}
    fakes = {}
    for tree in trees:
        tree.fresh_database()
    start = trees[0].database_now()
    intended = (start + timedelta(minutes=9)).replace(second=0, microsecond=0)
    for tree in trees:
        tree.seed(_seed_group("rate", rows, 1, intended + LEAD))
        fakes[tree.label] = FakeTelegram(max_per_second=provider_rate, retry_after=2).start()
    try:
        for tree in trees:
            env = _telegram_env(fakes[tree.label], NUDGE_TELEGRAM_RATE=str(configured_rate))
            window[tree.label] = {"materialize_s": tree.materialize(start, **env), "runs": []}
        # Cron: a deliver run at the start of every minute until a minute after the
        # intended instant, each version's runs side by side.
        end = intended + timedelta(minutes=1, seconds=30)
        while True:
            now = datetime.now(UTC)
            if now >= end:
                break
            processes = {
                tree.label: tree.start(
                    "deliver",
                    **_telegram_env(fakes[tree.label], NUDGE_TELEGRAM_RATE=str(configured_rate)),
                )
                for tree in trees
            }
            for label, process in processes.items():
                window[label]["runs"].append(_summary(process))
            next_minute = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
            time.sleep(max(0.0, (next_minute - datetime.now(UTC)).total_seconds()))
        results = {}
        intended_ts = intended.timestamp()
        for tree in trees:
            fake = fakes[tree.label]
            late = _lateness(fake, {f"rate{i}-0": intended_ts for i in range(rows)})
            in_window = [x for x in late if -360 <= x <= 60]
            results[tree.label] = {
                "rows": rows,
                "delivered": len(late),
                "share_in_window": len(in_window) / rows,
                "worst_lateness_s": max(late) if late else None,
                "earliest_s": min(late) if late else None,
                "p95_lateness_s": _percentile(late, 0.95),
                "floods_429": fake.flood_count(),
                "busiest_second": fake.busiest_second(),
                "outcomes": tree.outcomes(),
                "deliver_runs": len(window[tree.label]["runs"]),
                "materialize_s": window[tree.label]["materialize_s"],
                "last_summary": window[tree.label]["runs"][-1]
                if window[tree.label]["runs"]
                else "",
            }
        return {
            "provider_rate": provider_rate,
            "configured_rate": configured_rate,
            "intended": intended.isoformat(),
            **results,
        }
    finally:
        for fake in fakes.values():
            fake.stop()


def _workers(tree: Tree, count: int, env: dict[str, str], workdir: Path) -> list[dict]:
    """``count`` bench.worker processes of ``tree``, released together; their reports."""
    processes, outs = start_released(count, workdir, "w", cwd=tree.path, env=tree.env(**env))
    for process in processes:
        _, err = process.communicate(timeout=1800)
        if process.returncode:
            raise RuntimeError(f"{tree.label}: worker failed: {err[-3000:]}")
    return [json.loads(out.read_text()) for out in outs]


def drain(tree: Tree, rows: int, tenants: int, workers: tuple[int, ...]) -> dict:
    """An instant provider (the recording channel): settled rows per second."""
    rounds = []
    for count in workers:
        tree.fresh_database()
        now = tree.database_now()
        # Every nudge already due when the workers start: intended over the last minute.
        tree.seed(
            _seed_group(
                "drn",
                tenants,
                rows // tenants,
                now + LEAD - timedelta(seconds=60),
                spread_seconds=50,
                channel="console",
            )
        )
        tree.materialize(now - timedelta(seconds=65))
        with tempfile.TemporaryDirectory(prefix="nudge-drain-") as tmp:
            recording = Path(tmp) / "sent.jsonl"
            env = {
                "NUDGE_CHANNEL_BACKENDS": json.dumps({"console": RECORDING}),
                "NUDGE_RECORDING_FILE": str(recording),
                "NUDGE_RUN_BUDGET_SECONDS": "600",
                "NUDGE_LEASE_SECONDS": "1200",
            }
            reports = _workers(tree, count, env, Path(tmp))
            lines = recording.read_text().splitlines() if recording.exists() else []
        texts = Counter(json.loads(line)["text"] for line in lines)
        seconds = max(r["last_work"] for r in reports) - min(r["started"] for r in reports)
        settled = sum(r["sent"] + r["skipped"] + r["failed"] for r in reports)
        rounds.append(
            {
                "workers": count,
                "settled": settled,
                "seconds": seconds,
                "rows_per_second": settled / seconds,
                "duplicates": sum(n - 1 for n in texts.values()),
                "recorded": len(lines),
            }
        )
        print(f"    {tree.label} drain x{count}: {settled / seconds:.0f} rows/s", flush=True)
    return {"rows": rows, "tenants": tenants, "rounds": rounds}


def fairness(tree: Tree, burst: int, others: int) -> dict:
    """One tenant's ``burst`` same-minute nudges among ``others`` tenants' one each:
    when does the others' last nudge go out (seconds after the run starts)?"""
    tree.fresh_database()
    now = tree.database_now()
    due = now + LEAD - timedelta(seconds=5)
    groups = [_seed_group("oth", others, 1, due, chat_base=2_000_000)]
    if burst:
        groups.append(_seed_group("big", 1, burst, due, chat_base=3_000_000))
    tree.seed(*groups)
    # The claim's fairness, not the per-user caps (which would cut the burst).
    tree.materialize(
        now, NUDGE_MAX_NUDGES_PER_USER="100000", NUDGE_MAX_NUDGES_PER_USER_MINUTE="100000"
    )
    with FakeTelegram() as fake, tempfile.TemporaryDirectory(prefix="nudge-fair-") as tmp:
        env = _telegram_env(
            fake,
            NUDGE_TELEGRAM_RATE="0",  # the claim's order alone, not pacing
            NUDGE_PER_CHAT_INTERVAL_SECONDS="0",
            NUDGE_RUN_BUDGET_SECONDS="600",
            NUDGE_LEASE_SECONDS="1200",
        )
        reports = _workers(tree, 2, env, Path(tmp))
        started = min(r["started"] for r in reports)
        others_at = [d.at for d in fake.delivered if d.text.startswith("Reminder: oth")]
        all_at = [d.at for d in fake.delivered]
    return {
        "burst": burst,
        "others": others,
        "others_delivered": len(others_at),
        "others_last_s": max(others_at) - started if others_at else None,
        "all_last_s": max(all_at) - started if all_at else None,
    }


def materialize(tree: Tree, users: int, per_user: int, workers: int = 1) -> dict:
    tree.fresh_database()
    now = tree.database_now()
    tree.seed(
        _seed_group("mat", users, per_user, now + timedelta(minutes=5), spread_seconds=3 * 3600)
    )
    args = ("--workers", str(workers)) if workers > 1 else ()
    seconds = tree.materialize(now, *args)
    again = tree.materialize(now, *args)
    return {
        "users": users,
        "per_user": per_user,
        "workers": workers,
        "seconds": seconds,
        "users_per_second": users / seconds,
        "again_seconds": again,
        "cycle_100k_minutes": 100_000 / (users / seconds) / 60,
    }


# --- the run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    latency_rows: int = 3_000
    provider_latency: float = 0.1
    rate_rows: int = 2_400
    provider_rate: int = 10
    configured_rate: float = 9.0
    drain_rows: int = 4_000
    drain_tenants: int = 1_000
    drain_workers: tuple[int, ...] = (1, 2, 4)
    fairness_bursts: tuple[int, ...] = (0, 1_000, 5_000)
    fairness_others: int = 1_000
    materialize_users: tuple[int, ...] = (3_000, 10_000)
    materialize_per_user: int = 20


QUICK = Plan(
    latency_rows=300,
    rate_rows=240,
    provider_rate=5,
    configured_rate=4.5,
    drain_rows=500,
    drain_tenants=100,
    drain_workers=(1, 2),
    fairness_bursts=(0, 500),
    fairness_others=100,
    materialize_users=(300,),
)


def run(plan: Plan, only: list[str], baseline_rev: str, save, tag: str = "") -> dict:
    """Run the workloads in ``only``; ``save(results)`` after each, so a long run
    that is stopped keeps what it measured."""
    results: dict = {"plan": plan.__dict__, "baseline": baseline_rev, "started": time.time()}
    current = Tree("current", ROOT, tag)
    with baseline_tree(baseline_rev, tag) as baseline:
        trees = [baseline, current]
        if "latency" in only:
            print("== burst vs latency", flush=True)
            results["latency"] = {
                t.label: latency(t, plan.latency_rows, plan.provider_latency) for t in trees
            }
            print(json.dumps(results["latency"], indent=1, default=str), flush=True)
            save(results)
        if "drain" in only:
            print("== instant provider drain", flush=True)
            results["drain"] = {
                t.label: drain(t, plan.drain_rows, plan.drain_tenants, plan.drain_workers)
                for t in trees
            }
            save(results)
        if "fairness" in only:
            print("== fairness", flush=True)
            results["fairness"] = {
                t.label: [fairness(t, b, plan.fairness_others) for b in plan.fairness_bursts]
                for t in trees
            }
            print(json.dumps(results["fairness"], indent=1), flush=True)
            save(results)
        if "materialize" in only:
            print("== materialize", flush=True)
            # The baseline at the first size only: at its rate the larger one
            # takes longer than the rest of the run together.
            results["materialize"] = {
                "baseline": [
                    materialize(baseline, users, plan.materialize_per_user)
                    for users in plan.materialize_users[:1]
                ],
                "current": [
                    materialize(current, users, plan.materialize_per_user)
                    for users in plan.materialize_users
                ],
            }
            save(results)
            results["materialize"]["current_2_workers"] = [
                materialize(current, users, plan.materialize_per_user, workers=2)
                for users in plan.materialize_users
            ]
            print(json.dumps(results["materialize"], indent=1), flush=True)
            save(results)
        if "rate" in only:
            print("== burst vs rate (real minutes: about 11)", flush=True)
            results["rate"] = rate(trees, plan.rate_rows, plan.provider_rate, plan.configured_rate)
            print(json.dumps(results["rate"], indent=1, default=str), flush=True)
            save(results)
    results["finished"] = time.time()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sidebyside", description=__doc__)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the git revision to compare")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {WORKLOADS}")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument(
        "--tag", default="", help="suffix for this run's databases, to run two at once"
    )
    parser.add_argument(
        "--json", metavar="PATH", default=str(ROOT / "bench/history/sidebyside.json")
    )
    parser.add_argument(
        "--report-from", metavar="JSON", help=f"only render the section ({REPORT}) from figures"
    )
    args = parser.parse_args()
    if args.report_from:
        write_report(json.loads(Path(args.report_from).read_text()), ROOT / REPORT)
        print(f"wrote {REPORT}")
        return
    only = [w for w in args.only.split(",") if w] or list(WORKLOADS)
    unknown = set(only) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    try:
        psycopg.connect(ADMIN_URL).close()
    except psycopg.Error as exc:
        parser.exit(2, f"cannot reach {ADMIN_URL} (set NUDGE_BENCH_ADMIN_URL): {exc}\n")
    target = Path(args.json)

    def save(results: dict) -> None:
        """Merge into the JSON file, so runs of different workloads add up."""
        merged = json.loads(target.read_text()) if target.exists() else {}
        merged.update(results, mode="quick" if args.quick else "full")
        target.write_text(json.dumps(merged, indent=1, default=str))

    results = run(QUICK if args.quick else Plan(), only, args.baseline, save, args.tag)
    save(results)
    print(f"wrote {target}")
    if not args.quick:
        write_report(json.loads(target.read_text()), ROOT / REPORT)
        print(f"wrote {REPORT}")


# --- the report ------------------------------------------------------------------------

START, END = "<!-- sidebyside:start -->", "<!-- sidebyside:end -->"


def _f(value: object, digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_f(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown(r: dict) -> str:
    """The side-by-side section of BENCHMARKS.md, from ``run``'s figures."""
    plan = r["plan"]
    out = [
        START,
        "## Round 2: the top of the hour, side by side (`python -m bench.sidebyside`)",
        "",
        f"Baseline: commit `{r['baseline']}` (sequential sends, two commits per row, the first "
        "429 pausing the channel for the rest of the run). Current: this checkout. Same machine, "
        "same PostgreSQL server (15, `127.0.0.1:5432`), same fake Telegram Bot API "
        "(tests/fakes), each version in its own freshly migrated database, data written "
        "through each version's own ORM and tenant scopes, nudges queued by its `materialize` "
        "and sent by its `deliver`, on the real clock. Two cores shared with other work: read "
        "the ratios. Raw figures: `bench/history/sidebyside.json`.",
        "",
    ]
    if r.get("note"):
        out += [r["note"], ""]
    if "latency" in r:
        b, c = r["latency"]["baseline"], r["latency"]["current"]
        out += [
            f"### Burst vs latency: {plan['latency_rows']:,} nudges due in one minute, a "
            f"provider answering each send in {plan['provider_latency'] * 1000:.0f} ms, one "
            "60-second `deliver` run",
            "",
            _table(
                ["version", "sent in the run", "seconds", "rows/s", "duplicates"],
                [
                    [
                        "baseline",
                        b["sent_in_one_run"],
                        b["seconds"],
                        b["rows_per_second"],
                        b["duplicates"],
                    ],
                    [
                        "current",
                        c["sent_in_one_run"],
                        c["seconds"],
                        c["rows_per_second"],
                        c["duplicates"],
                    ],
                ],
            ),
            "",
            f"Target: all {plan['latency_rows']:,} in one run — "
            f"**{'met' if c['sent_in_one_run'] == plan['latency_rows'] else 'not met'}** "
            f"(x{c['rows_per_second'] / max(b['rows_per_second'], 1e-9):.0f} rows/s). The "
            "current run used `NUDGE_TELEGRAM_RATE=1000` so that it measures concurrency, not "
            "pacing (Telegram itself allows ~30/s per bot). Its summary line: "
            f"`{c['summary']}`",
            "",
        ]
    if "rate" in r:
        rate = r["rate"]
        rows = []
        for label in ("baseline", "current"):
            x = rate[label]
            rows.append(
                [
                    label,
                    x["delivered"],
                    f"{x['share_in_window'] * 100:.1f} %",
                    x["earliest_s"],
                    x["worst_lateness_s"],
                    x["floods_429"],
                    f"{x['floods_429'] / max(1, x['rows']) * 100:.1f} %",
                    x["busiest_second"],
                    x["outcomes"].get("expired", 0),
                    x["outcomes"].get("pending", 0),
                ]
            )
        cur = rate["current"]
        met = (
            cur["share_in_window"] >= 0.99
            and cur["outcomes"].get("expired", 0) == 0
            and cur["floods_429"] < 0.05 * cur["rows"]
        )
        out += [
            f"### Burst vs rate: {plan['rate_rows']:,} nudges meant for one minute, a provider "
            f"allowing {rate['provider_rate']}/s (429 + `retry_after` above it), `deliver` "
            "every minute as cron runs it",
            "",
            f"Current: `NUDGE_TELEGRAM_RATE={rate['configured_rate']:g}`; smoothing spreads the "
            "minute up to 6 minutes earlier at `materialize`. Lateness is the delivery's arrival "
            "at the provider minus the intended instant (negative: early).",
            "",
            _table(
                [
                    "version",
                    "delivered",
                    "within -6 min … +1 min",
                    "earliest s",
                    "worst s",
                    "429s",
                    "429s / messages",
                    "busiest second",
                    "expired",
                    "still pending",
                ],
                rows,
            ),
            "",
            "Targets: ≥ 99 % in the window, 0 expired, 429s < 5 % — "
            f"**{'met' if met else 'not met'}**.",
            "",
            "**20,000 at 25/s, on paper.** A minute carries 25 x 55 s x 0.9 = 1,237 Telegram "
            "nudges; smoothing fills the six minutes before (7 x 1,237 = 8,659 sent on time or "
            "early). The other 11,341 stay in their minute and are paced out at 25/s after it: "
            "the last leaves about 11,341 / 25 ≈ 7.6 minutes late — inside the 15-minute grace, "
            "so none expire, but `nudges_on_time` fails, as it should: one bot cannot carry "
            "20,000 nudges in a minute (Telegram allows ~30/s). The remedy is a faster channel "
            "(WhatsApp at a raised MPS), not more workers.",
            "",
        ]
    if "drain" in r:
        rows = []
        for label in ("baseline", "current"):
            for x in r["drain"][label]["rounds"]:
                rows.append(
                    [
                        label,
                        x["workers"],
                        x["settled"],
                        x["seconds"],
                        x["rows_per_second"],
                        x["duplicates"],
                    ]
                )
        one = {lab: r["drain"][lab]["rounds"][0]["rows_per_second"] for lab in r["drain"]}
        out += [
            f"### Instant provider: {plan['drain_rows']:,} due rows over "
            f"{plan['drain_tenants']:,} tenants, separate worker processes, recording channel",
            "",
            _table(["version", "workers", "settled", "seconds", "rows/s", "duplicates"], rows),
            "",
            f"One worker: {one['current']:,.0f} rows/s against {one['baseline']:,.0f} "
            f"(x{one['current'] / max(one['baseline'], 1e-9):.1f}); target ≥ 1,000/s — "
            f"**{'met' if one['current'] >= 1000 else 'not met'}**. Procrastinate's "
            "`fetch_job` claims 423 jobs/s on this machine (section 5 below, one job per "
            "call): one worker settles — claims, resolves, sends and records — "
            f"x{one['current'] / 423:.1f} that, and our batched claim alone claims x36 it.",
            "",
        ]
    if "fairness" in r:
        rows = []
        for label in ("baseline", "current"):
            for x in r["fairness"][label]:
                rows.append(
                    [
                        label,
                        x["burst"],
                        x["others"],
                        x["others_delivered"],
                        x["others_last_s"],
                        x["all_last_s"],
                    ]
                )
        out += [
            f"### Fairness: one tenant's same-minute burst among {plan['fairness_others']:,} "
            "other tenants' nudges of that minute (2 workers, unpaced provider)",
            "",
            _table(
                [
                    "version",
                    "burst",
                    "others",
                    "others sent",
                    "others' last sent after s",
                    "everything sent after s",
                ],
                rows,
            ),
            "",
            "The others' last send should not depend on the burst's size.",
            "",
        ]
    if "materialize" in r:
        rows = []
        for label in ("baseline", "current", "current_2_workers"):
            for x in r["materialize"].get(label, []):
                rows.append(
                    [
                        label,
                        x["users"],
                        x["workers"],
                        x["seconds"],
                        x["users_per_second"],
                        x["cycle_100k_minutes"],
                        x["again_seconds"],
                        100_000 / (x["users"] / x["again_seconds"]) / 60,
                    ]
                )
        out += [
            f"### Materialize: users with {plan['materialize_per_user']} follow-ups each over "
            "the 3-hour window (`--no-sync`)",
            "",
            _table(
                [
                    "version",
                    "users",
                    "workers",
                    "first fill s",
                    "users/s",
                    "100,000 users, first fill, min",
                    "next run s",
                    "100,000 users, steady cycle, min",
                ],
                rows,
            ),
            "",
            "Target: a 100,000-user cycle within 15 minutes on this machine. The *first fill* "
            "queues every nudge of an empty look-ahead (a new deployment); the *next run* is "
            "the every-15-minutes cycle, where most users' nudges are already queued and only "
            "what the moved window brings in is written. Caveat: this "
            "server runs with autovacuum off, so a queue filled during the run is never "
            "analysed; at 10,000 users the planner, without statistics, may read a user's "
            "pending rows through the claim's index (ARCHITECTURE, 'Materialize at scale'), "
            "which a deployment with autovacuum on does not do.",
            "",
        ]
    out += [
        "*Below: round 1's figures (`python -m bench`), measured on the round-1 code; where "
        "they speak of delivery rows/s, materialize users/s or fairness, the side-by-side "
        "figures above supersede them.*",
        "",
        END,
    ]
    return "\n".join(out) + "\n"


def write_report(results: dict, target: Path) -> None:
    """Put the side-by-side section at the top of BENCHMARKS.md (replacing an older one)."""
    text = target.read_text() if target.exists() else "# BENCHMARKS\n"
    section = markdown(results)
    if START in text:
        before, rest = text.split(START, 1)
        text = before + section + rest.split(END, 1)[1].lstrip("\n")
    else:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{section}\n{body.lstrip()}"
    target.write_text(text)


if __name__ == "__main__":
    main()
