"""Tables for the terminal and BENCHMARKS.md."""

from __future__ import annotations

import json
import os
import platform


def machine() -> dict:
    import django
    import psycopg

    from bench import env

    info = {
        "cores": os.cpu_count(),
        "memory_gib": round(_meminfo_kib() / 1024 / 1024, 1),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "postgres": env.sql("SHOW server_version")[0][0],
        "postgres_settings": {
            name: env.sql(f"SHOW {name}")[0][0]
            for name in ("shared_buffers", "work_mem", "max_connections", "jit")
        },
    }
    try:
        import procrastinate

        info["procrastinate"] = procrastinate.__version__
    except (ImportError, AttributeError):
        info["procrastinate"] = "not installed"
    from django.conf import settings

    info["server"] = "embedded (pgserver)" if settings.EMBEDDED_DATABASE else "DATABASE_URL"
    return info


def _meminfo_kib() -> int:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}" if value < 1 else f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def section(name: str, result: dict) -> str:
    from bench import sections

    return getattr(sections, name)(result)


def markdown(results: dict) -> str:
    from bench import sections

    return sections.document(results, json.dumps(results, indent=1, default=str))
