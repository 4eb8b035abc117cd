"""Fetching an address a tenant gave us: parsed once, vetted, pinned and bounded.

The address is parsed once, with urllib3's ``parse_url`` (the HTTP client's own parser),
and the request built from that parse, so the guard and the client cannot disagree about
the host; backslashes, control characters, whitespace and userinfo are refused. The host is
resolved once; every address must be public (``is_public``), and the TCP connection is
pinned to the first and its peer checked, while TLS still verifies the host name: a DNS
answer that changes between check and connect changes nothing. Each redirect hop is
handled the same way (``follow``). The whole fetch has one wall-clock deadline enforced at
the socket (a read timeout restarts with every byte a drip-feeding host sends). No proxy
from the environment is used: the peer must be the vetted address.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from http.client import HTTPException
from typing import Any
from urllib.parse import urljoin

import urllib3
from requests.certs import where as ca_bundle
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import HTTPError, LocationParseError
from urllib3.util import Url

from providers.base import MalformedPayload, ProviderError, RetryLater, record_call

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_REDIRECTS = 3
# A host too slow to finish a download is left alone this long; its stored copy keeps nudging.
SLOW_HOST_BACKOFF = timedelta(hours=1)
REDIRECTS = frozenset({301, 302, 303, 307, 308})

# Global to ``is_global`` yet leading inside: NAT64 reaches any IPv4; 6to4 and Teredo embed one.
_DENIED_V6 = tuple(
    ipaddress.ip_network(net)
    for net in ("64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32")
)


class UnsafeAddress(ProviderError):
    """The address is not plain http(s), or leads into a private network."""


def parse_target(url: str, label: str) -> Url:
    """Where one request goes, as the HTTP client reads it: its port filled in, and an IPv6
    host without its brackets."""
    if any(ch == "\\" or ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise UnsafeAddress(
            f"{label}: the address must be an http:// or https:// URL without spaces, "
            "backslashes or control characters"
        )
    try:
        parsed = urllib3.util.parse_url(url)
    except LocationParseError:
        raise UnsafeAddress(f"{label}: the address cannot be read as a URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UnsafeAddress(f"{label}: the address must be an http:// or https:// URL")
    if parsed.auth is not None:
        raise UnsafeAddress(f"{label}: the address must not carry a user name or password")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return parsed._replace(host=parsed.host.strip("[]"), port=port)


def is_public(address: Address) -> bool:
    """Reachable on the public internet and not a door back into a private one."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public(address.ipv4_mapped)
        if any(address in net for net in _DENIED_V6):
            return False
    return address.is_global and not address.is_multicast


def vetted_address(target: Url, *, allow_private: bool, label: str) -> str:
    """The address to connect to; every address of the host must be public."""
    try:
        literal = ipaddress.ip_address(target.host)
    except ValueError:
        literal = None
    if literal is not None:
        candidates = [str(literal)]
    else:
        try:
            infos = socket.getaddrinfo(target.host, target.port, proto=socket.IPPROTO_TCP)
            candidates = [info[4][0].split("%")[0] for info in infos]
        except (OSError, UnicodeError):
            raise RetryLater(f"{label}: cannot resolve {target.host}") from None
        if not candidates:
            raise RetryLater(f"{label}: cannot resolve {target.host}")
    if not allow_private:
        for candidate in candidates:
            if not is_public(ipaddress.ip_address(candidate)):
                raise UnsafeAddress(
                    f"{label}: {target.host} resolves to a private or local address; refused"
                )
    return candidates[0]


class Deadline:
    """A wall-clock deadline that shuts down the sockets it watches when it passes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(self.at - time.monotonic(), 0.0)

    def overrun(self, label: str) -> str:
        return f"{label}: the download took longer than {self.seconds:.0f}s"

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
        if self.expired:  # connected just as it passed
            self._expire()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cancel(self) -> None:
        self._timer.cancel()


class _Pinned:
    """Connects to the vetted address (not to whatever the name resolves to now)."""

    def __init__(self, *args: Any, pinned: str, deadline: Deadline, **kwargs: Any) -> None:
        self._pinned = pinned
        self._deadline = deadline
        super().__init__(*args, **kwargs)

    def _new_conn(self) -> socket.socket:
        timeout = min(float(self.timeout or 10.0), self._deadline.remaining()) or 0.001
        sock = socket.create_connection((self._pinned, self.port), timeout=timeout)
        peer = ipaddress.ip_address(sock.getpeername()[0].split("%")[0])
        if peer != ipaddress.ip_address(self._pinned):
            sock.close()
            raise OSError("connected to an address that was not vetted")
        self._deadline.watch(sock)
        return sock


class _PinnedHTTP(_Pinned, HTTPConnection):
    pass


class _PinnedHTTPS(_Pinned, HTTPSConnection):
    pass


@contextmanager
def follow(
    url: str,
    headers_for: Callable[[str], dict[str, str]],
    *,
    allow_private: bool,
    deadline: Deadline,
    timeout: float,
    label: str,
    method: str = "GET",
    body: bytes | None = None,
) -> Iterator[tuple[urllib3.BaseHTTPResponse, str]]:
    """The first answer that is not a redirect, and the address that gave it, its body read
    as decoded chunks (``stream``). Each hop (a GET unless ``method`` says otherwise, e.g.
    CalDAV's PROPFIND or REPORT with an XML ``body``) is parsed, vetted, pinned and counted
    as one call; ``headers_for`` gives its headers (a password only to its own site).
    Network failures become RetryLater."""
    for _hop in range(MAX_REDIRECTS + 1):
        target = parse_target(url, label)
        address = vetted_address(target, allow_private=allow_private, label=label)
        record_call()
        if deadline.remaining() <= 0:
            raise ProviderError(deadline.overrun(label))
        options: dict[str, Any] = {"timeout": timeout, "pinned": address, "deadline": deadline}
        connection_class = _PinnedHTTP
        if target.scheme == "https":
            options.update(cert_reqs="CERT_REQUIRED", ca_certs=ca_bundle())
            connection_class = _PinnedHTTPS
        with closing(connection_class(target.host, target.port, **options)) as connection:
            try:
                connection.request(
                    method,
                    target.request_uri,
                    body=body,
                    headers={"Accept-Encoding": "gzip, deflate", **headers_for(url)},
                    preload_content=False,
                    decode_content=True,
                )
                answer = connection.getresponse()
            except (HTTPError, HTTPException, OSError) as exc:
                if deadline.expired:
                    raise ProviderError(deadline.overrun(label)) from None
                raise RetryLater(f"{label}: network error ({type(exc).__name__})") from None
            with answer:
                location = answer.headers.get("Location")
                if answer.status not in REDIRECTS or not location:
                    yield answer, url
                    return
        url = urljoin(url, location)
    raise ProviderError(f"{label}: too many redirects")


def bounded_body(
    response: urllib3.BaseHTTPResponse,
    deadline: Deadline,
    limit: int,
    *,
    label: str,
    what: str,
) -> bytes:
    """The body, cut at ``limit`` bytes (decompressed) and at the fetch's deadline."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise MalformedPayload(f"{label}: {what} is larger than {limit} bytes; refused")
    body = bytearray()
    try:
        for chunk in response.stream(64 * 1024):
            body += chunk
            if len(body) > limit:
                raise MalformedPayload(f"{label}: {what} is larger than {limit} bytes; refused")
            if deadline.remaining() <= 0:
                break
    except (HTTPError, OSError):
        if not deadline.expired:
            raise ProviderError(f"{label}: the download was interrupted") from None
    if deadline.expired or deadline.remaining() <= 0:
        raise RetryLater(
            f"{deadline.overrun(label)}; trying again later", retry_after=SLOW_HOST_BACKOFF
        )
    return bytes(body)
