"""Helpers for the push tests: the app served on 127.0.0.1 for the fakes to post to.

The fakes' notifications are real HTTP requests, so the app must be really
listening: a threaded WSGI server around Django's handler, for one test.
Its requests run on their own database connections, so a test using it needs
``transactional_db`` (what the test writes is committed, and what the app
writes is seen).
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.core.handlers.wsgi import WSGIHandler
from django.db import connections
from django.test import Client

from calendars.models import CalendarConnection, CalendarEvent
from calendars.push import worklist
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Silent: a channel token travels in a header, not the request line, but stay quiet."""


class _ClosingApp:
    """Django's handler, closing the thread's database connection after each request."""

    def __init__(self) -> None:
        self.handler = WSGIHandler()

    def __call__(self, environ, start_response):
        try:
            return self.handler(environ, start_response)
        finally:
            connections.close_all()


@contextmanager
def serve_app() -> Iterator[str]:
    """The app on 127.0.0.1 at an ephemeral port, for one block; its base URL."""
    server = make_server(
        "127.0.0.1", 0, _ClosingApp(), server_class=_ThreadingServer, handler_class=_QuietHandler
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def enroll(connection: CalendarConnection, now: datetime) -> None:
    worklist.enroll(connection.pk, connection.user_id, now)


def pending_nudges(user_id: int) -> list[ScheduledSend]:
    with tenant_scope(user_id):
        return list(
            ScheduledSend.objects.filter(user_id=user_id, outcome__isnull=True).order_by("fire_at")
        )


def titles(connection: CalendarConnection) -> list[str]:
    with tenant_scope(connection.user_id):
        return list(
            CalendarEvent.objects.filter(connection_id=connection.pk)
            .order_by("starts_at")
            .values_list("title", flat=True)
        )


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def admin_push_cell(client: Client, connection: CalendarConnection, **filters: str) -> str | None:
    """The push column of the connection's own row on the admin's connection list
    (with ``filters`` as the sidebar sets them); None when the row is not listed."""
    page = client.get("/admin/calendars/calendarconnection/", filters).content.decode()
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S):
        if f"/calendarconnection/{connection.pk}/change/" in row:
            cell = re.search(r'<td class="field-push">(.*?)</td>', row, re.S)
            return html.unescape(cell[1]).strip() if cell else ""
    return None
