"""Looking at the ICS parse template from a test."""

from __future__ import annotations

from providers import parse_template


def template_pid() -> int | None:
    """The pid of this process's template, if it has one."""
    with parse_template._lock:
        template = parse_template._template
        return template.process.pid if template is not None and template.usable() else None
