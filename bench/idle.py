"""Workloads 1 and 2: an idle minute as tenants grow, and the naive sweep beside it.

For each tenant count the queue holds the same number of pending rows, all
in the future, spread round-robin over the tenants. Ours is one ``deliver``
run: DB time from EXPLAIN (ANALYZE, BUFFERS) of the claim under the bypass,
and the whole ``run_deliver()`` in-process. The naive sweep is what the
design replaced: for each tenant, inside its ``tenant_scope``, look for due
follow-ups and events, then a stand-in for the per-tenant provider call — a
loopback HTTP round trip (keep-alive, to a tiny server in this process),
far cheaper than any real provider, so the naive figure is a lower bound.
"""

from __future__ import annotations

import http.client
import http.server
import random
import socket
import threading
import time
from datetime import timedelta

from bench import data, env


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else headers and body wait on a delayed ACK

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


class LoopbackProvider:
    """A keep-alive HTTP round trip to 127.0.0.1: the per-tenant provider call."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.client = http.client.HTTPConnection("127.0.0.1", self.server.server_address[1])
        self.client.connect()
        self.client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def call(self, user_id: int) -> None:
        self.client.request("GET", f"/calendars/{user_id}/changes")
        self.client.getresponse().read()

    def close(self) -> None:
        self.client.close()
        self.server.shutdown()
        self.server.server_close()


def naive_sweep(user_ids: list[int], at, provider: LoopbackProvider) -> int:
    """The per-tenant sweep: every tenant, every minute. Returns subjects found due."""
    from calendars.models import CalendarEvent
    from core.config import NudgeConfig
    from followups.models import FollowUp
    from tenancy.scope import tenant_scope

    config = NudgeConfig.from_settings()
    horizon = at + config.default_lead
    found = 0
    for user_id in user_ids:
        with tenant_scope(user_id):
            found += len(
                FollowUp.objects.filter(
                    user_id=user_id, done=False, due_at__gt=at, due_at__lte=horizon
                ).values_list("id", flat=True)
            )
            found += len(
                CalendarEvent.objects.filter(
                    user_id=user_id, starts_at__gt=at, starts_at__lte=horizon
                ).values_list("id", flat=True)
            )
        provider.call(user_id)
    return found


def run(sizes, users: list[int]) -> dict:
    from sweeps.deliver import run_deliver

    results = {"rows": sizes.idle_rows, "reps": sizes.reps * 3, "by_tenants": []}
    provider = LoopbackProvider()
    rng = random.Random(7)
    try:
        for tenants in sizes.tenants:
            with env.stage(f"idle minute: {tenants:,} tenants, {sizes.idle_rows:,} pending rows"):
                at = env.now()
                data.truncate_queue()
                with data.rebuilt_indexes("scheduled_sends"):
                    data.queue_synthetic(
                        users[:tenants],
                        sizes.idle_rows,
                        start=at + timedelta(minutes=5),
                        span=timedelta(hours=3),
                    )
                env.vacuum("scheduled_sends")
                explains, runs = [], []
                run_deliver()  # warm the connection and the channel registry
                # Whole runs are mostly two commits (WAL flushes): noisy, so take many.
                for _ in range(sizes.reps * 3):
                    explains.append(env.explain_claim(env.now()))
                    seconds, report = env.timed(run_deliver)
                    assert report.claimed == 0, report.summary()
                    runs.append(seconds * 1000)
                sample = users[:tenants]
                if tenants > sizes.naive_sample:
                    sample = rng.sample(sample, sizes.naive_sample)
                started = time.perf_counter()
                naive_sweep(sample, env.now(), provider)
                naive_seconds = time.perf_counter() - started
                per_tenant_ms = naive_seconds * 1000 / len(sample)
                entry = {
                    "tenants": tenants,
                    "claim_db_ms": [e["db_ms"] for e in explains],
                    "claim_planning_ms": [e["planning_ms"] for e in explains],
                    "claim_execution_ms": [e["execution_ms"] for e in explains],
                    "claim_buffers": [e["buffers"] for e in explains],
                    "claim_plan": explains[-1]["cte_plan"],
                    "run_deliver_ms": runs,
                    "naive_sampled_tenants": len(sample),
                    "naive_sample_seconds": naive_seconds,
                    "naive_per_tenant_ms": per_tenant_ms,
                    "naive_full_sweep_ms": per_tenant_ms * tenants,
                    "naive_extrapolated": len(sample) < tenants,
                }
                entry["ratio_naive_over_ours"] = entry["naive_full_sweep_ms"] / env.median(runs)
                results["by_tenants"].append(entry)
                print(
                    f"  claim DB {env.median(entry['claim_db_ms']):.3f} ms, run_deliver "
                    f"{env.median(runs):.1f} ms, naive {entry['naive_full_sweep_ms']:.0f} ms"
                    f" ({per_tenant_ms:.3f} ms/tenant)",
                    flush=True,
                )
    finally:
        provider.close()
    first, last = results["by_tenants"][0], results["by_tenants"][-1]
    results["db_ratio_last_over_first"] = env.median(last["claim_db_ms"]) / env.median(
        first["claim_db_ms"]
    )
    results["run_ratio_last_over_first"] = env.median(last["run_deliver_ms"]) / env.median(
        first["run_deliver_ms"]
    )
    return results
