"""A real CalDAV server for tests: Radicale on 127.0.0.1, with a thin front in between.

Radicale (RFC 4791 / 6578) keeps its collections in a temporary folder and checks
passwords from a plain htpasswd file. Calendars and events are made through CalDAV
itself (MKCALENDAR, PUT, DELETE), as a calendar app would. The front, a WSGI wrapper,
only counts requests, holds every answer back ``latency`` seconds (a real server's round
trip), and can answer in Radicale's place: ``next_answers`` (a 429, a 503), or
``lose_sync_tokens`` (a sync-collection REPORT from a token answered with
DAV:valid-sync-token, as a server that forgot its tokens does).

    with RadicaleServer() as server:
        server.add_user("ana", "app-password")
        calendar = server.make_calendar("ana", "work", "Work")
        server.put_event(calendar, "standup", ICS_TEXT)
"""

from __future__ import annotations

import base64
import http.client
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import radicale
import radicale.config

LOST_TOKEN = (
    b'<?xml version="1.0" encoding="utf-8"?><D:error xmlns:D="DAV:"><D:valid-sync-token/></D:error>'
)

NO_SYNC = (
    b'<?xml version="1.0" encoding="utf-8"?><D:error xmlns:D="DAV:"><D:supported-report/></D:error>'
)


@dataclass(frozen=True)
class Scripted:
    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class RadicaleServer:
    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests: list[tuple[str, str]] = []
        self.next_answers: list[Scripted] = []
        self.lose_sync_tokens = False
        self.no_sync_collection = False  # as a server without RFC 6578
        self._lock = threading.Lock()
        self._folder = tempfile.TemporaryDirectory(prefix="radicale-")
        root = Path(self._folder.name)
        self._users = root / "users"
        self._users.write_text("")
        # Radicale says it made its storage folder, at WARNING: quiet below errors.
        logging.getLogger("radicale").setLevel(logging.ERROR)
        configuration = radicale.config.load()
        configuration.update(
            {
                "auth": {
                    "type": "htpasswd",
                    "htpasswd_filename": str(self._users),
                    "htpasswd_encryption": "plain",
                    "delay": "0",
                },
                "storage": {
                    "filesystem_folder": str(root / "collections"),
                    "_filesystem_fsync": "False",
                },
                "server": {"delay_on_error": "0"},
                "rights": {"type": "owner_only"},
                "logging": {"level": "error"},
            },
            "test",
            privileged=True,
        )
        self._app = radicale.Application(configuration)
        self._httpd = make_server(
            "127.0.0.1", 0, self._front, server_class=_Server, handler_class=_QuietHandler
        )
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> RadicaleServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._folder.cleanup()

    # The front --------------------------------------------------------------------

    def _front(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = _Body(body)
        with self._lock:
            self.requests.append((method, path))
            scripted = self.next_answers.pop(0) if self.next_answers else None
            lose = (
                self.lose_sync_tokens
                and method == "REPORT"
                and b"sync-collection" in body
                and re.search(rb"sync-token>[^<]+</", body) is not None  # not a first sync
            )
        if self.latency:
            time.sleep(self.latency)
        if lose:
            scripted = Scripted(403, LOST_TOKEN, (("Content-Type", "application/xml"),))
        if self.no_sync_collection and method == "REPORT" and b"sync-collection" in body:
            scripted = Scripted(403, NO_SYNC, (("Content-Type", "application/xml"),))
        if scripted is not None:
            reason = http.client.responses.get(scripted.status, "")
            start_response(f"{scripted.status} {reason}", list(scripted.headers))
            return [scripted.body]
        return self._app(environ, start_response)

    def count(self, method: str | None = None) -> int:
        with self._lock:
            return sum(1 for m, _ in self.requests if method is None or m == method)

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()

    # Setting up, through CalDAV ----------------------------------------------------

    def add_user(self, name: str, password: str) -> None:
        with self._lock, self._users.open("a") as users:
            users.write(f"{name}:{password}\n")
        self._passwords = {**getattr(self, "_passwords", {}), name: password}

    def dav(self, user: str, method: str, path: str, body: str = "", **headers: str) -> int:
        """One request as ``user`` straight to Radicale (not counted, no latency)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        pair = f"{user}:{self._passwords[user]}".encode()
        connection.request(
            method,
            path,
            body=body.encode(),
            headers={"Authorization": "Basic " + base64.b64encode(pair).decode(), **headers},
        )
        status = connection.getresponse().status
        connection.close()
        with self._lock:
            self.requests.pop()  # set-up requests are not the client's
        return status

    def make_calendar(self, user: str, slug: str, name: str, components: str = "VEVENT") -> str:
        """MKCALENDAR under the user's home; the calendar's path."""
        path = f"/{user}/{slug}/"
        self.dav(user, "MKCOL", f"/{user}/")
        comps = "".join(f'<C:comp name="{c}"/>' for c in components.split(","))
        body = (
            '<?xml version="1.0" encoding="utf-8"?>'
            '<C:mkcalendar xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">'
            f"<D:set><D:prop><D:displayname>{name}</D:displayname>"
            f"<C:supported-calendar-component-set>{comps}</C:supported-calendar-component-set>"
            "</D:prop></D:set></C:mkcalendar>"
        )
        status = self.dav(user, "MKCALENDAR", path, body, **{"Content-Type": "application/xml"})
        assert status == 201, status
        return path

    def put_event(self, calendar: str, name: str, ics: str) -> None:
        user = calendar.strip("/").split("/")[0]
        status = self.dav(
            user,
            "PUT",
            f"{calendar}{name}.ics",
            ics,
            **{"Content-Type": "text/calendar; charset=utf-8"},
        )
        assert status in (201, 204), status

    def delete_event(self, calendar: str, name: str) -> None:
        user = calendar.strip("/").split("/")[0]
        assert self.dav(user, "DELETE", f"{calendar}{name}.ics") in (200, 204)


class _Body:
    """The request body, already read (the front had to look at it)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else self._at + size
        chunk, self._at = self._data[self._at : end], min(end, len(self._data))
        return chunk

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)
