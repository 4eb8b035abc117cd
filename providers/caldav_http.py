"""CalDAV's HTTP: PROPFIND and REPORT with XML bodies, vetted, pinned and bounded through
``untrusted_fetch`` like an ICS feed. The password goes as HTTP Basic only to the server's
own site (for https, a host sharing its last two labels, as iCloud's ``pNN-caldav``), and
never into an error. A body with a DOCTYPE is refused, so no entity can be expanded.
"""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urljoin
from xml.sax.saxutils import escape

import urllib3
from urllib3.exceptions import LocationParseError

from providers import untrusted_fetch
from providers.base import (
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    raise_for_transient,
)
from providers.untrusted_fetch import Deadline, bounded_body

NAME = "caldav"
NS = {"d": "DAV:", "c": "urn:ietf:params:xml:ns:caldav", "cs": "http://calendarserver.org/ns/"}
REAUTH = "caldav: the server refused the password; it needs your password again"


class SyncTokenLost(ProviderError):
    """The server no longer knows the stored sync token (DAV:valid-sync-token)."""


@dataclass(frozen=True)
class DavResponse:
    """One ``DAV:response`` of a multistatus: its href, its status, its found properties."""

    href: str
    status: int | None
    props: dict[str, ET.Element] = field(default_factory=dict)

    def text(self, tag: str) -> str:
        element = self.props.get(tag)
        return (element.text or "").strip() if element is not None else ""

    def hrefs(self, tag: str) -> list[str]:
        element = self.props.get(tag)
        if element is None:
            return []
        return [(h.text or "").strip() for h in element.iter("{DAV:}href") if h.text]


@dataclass(frozen=True)
class Multistatus:
    responses: list[DavResponse]
    sync_token: str = ""


def site_of(url: str) -> tuple[str, str]:
    """(scheme, site) that the password may be sent to; see the module's docstring."""
    try:
        parsed = urllib3.util.parse_url(url)
    except LocationParseError:
        return ("", "?")
    host = (parsed.host or "?").lower()
    if parsed.scheme != "https":
        return (parsed.scheme or "", f"{host}:{parsed.port or 80}")
    labels = host.split(".")
    return ("https", ".".join(labels[-2:]) if len(labels) > 2 else host)


@dataclass
class DavClient:
    """One connection's requests: its account, its guard settings and its deadline."""

    base_url: str
    username: str
    password: str
    allow_private: bool
    timeout: float
    deadline: Deadline
    max_bytes: int

    def _headers(self, url: str, depth: str | None, body: bytes | None) -> dict[str, str]:
        headers = {"Accept": "application/xml, text/xml"}
        if body is not None:
            headers["Content-Type"] = "application/xml; charset=utf-8"
        if depth is not None:
            headers["Depth"] = depth
        if site_of(url) == site_of(self.base_url):
            pair = f"{self.username}:{self.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return headers

    def request(
        self, method: str, url: str, body: str | None = None, depth: str | None = None
    ) -> tuple[int, bytes, str]:
        """(status, body, final url) of one request; redirects followed, each hop vetted.
        401 is NeedsReauth, 429 and 5xx RetryLater (Retry-After honoured)."""
        payload = body.encode() if body is not None else None
        answer, final = untrusted_fetch.follow(
            url,
            lambda hop: self._headers(hop, depth, payload),
            allow_private=self.allow_private,
            deadline=self.deadline,
            timeout=self.timeout,
            label=NAME,
            method=method,
            body=payload,
        )
        with answer:
            raise_for_transient(answer, NAME, datetime.now(UTC))
            if answer.status_code == 401:
                raise NeedsReauth(REAUTH)
            content = bounded_body(
                answer,
                self.deadline,
                self.max_bytes,
                label=NAME,
                what="the server's answer",
            )
            return answer.status_code, content, final

    def multistatus(
        self, method: str, url: str, body: str, depth: str, *, sync: bool = False
    ) -> Multistatus:
        """A PROPFIND or REPORT's 207, read; ``sync``: a lost token is SyncTokenLost."""
        status, content, final = self.request(method, url, body, depth)
        if sync and status in (403, 409) and b"valid-sync-token" in content:
            raise SyncTokenLost("caldav: the server no longer knows the sync token")
        if status == 404:
            raise ProviderError("caldav: the calendar is not on the server any more (HTTP 404)")
        if status != 207:
            raise ProviderError(f"caldav: the server answered HTTP {status} to {method}")
        return parse_multistatus(content, final)


def parse_multistatus(content: bytes, base: str) -> Multistatus:
    """A multistatus body; hrefs made absolute against ``base``. MalformedPayload when
    it is not one (or declares a DOCTYPE)."""
    if b"<!DOCTYPE" in content.upper():
        raise MalformedPayload("caldav: the answer declares a DOCTYPE; refused")
    try:
        root = ET.fromstring(content)  # noqa: S314 - no DOCTYPE, so no entity to expand
    except ET.ParseError:
        raise MalformedPayload("caldav: the answer is not XML") from None
    if root.tag != "{DAV:}multistatus":
        raise MalformedPayload("caldav: the answer is not a DAV multistatus")
    responses = []
    for item in root.findall("d:response", NS):
        href = urljoin(base, (item.findtext("d:href", "", NS) or "").strip())
        status = _status(item.findtext("d:status", "", NS))
        props: dict[str, ET.Element] = {}
        for propstat in item.findall("d:propstat", NS):
            if _status(propstat.findtext("d:status", "", NS)) != 200:
                continue
            for prop in propstat.findall("d:prop", NS):
                props.update((child.tag, child) for child in prop)
        responses.append(DavResponse(href, status, props))
    return Multistatus(responses, (root.findtext("d:sync-token", "", NS) or "").strip())


def _status(line: str | None) -> int | None:
    """The code of an ``HTTP/1.1 404 Not Found`` status line."""
    parts = (line or "").split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def propfind(props: str) -> str:
    """A PROPFIND body asking for ``props`` (XML elements, namespaces d, c and cs)."""
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav" '
        f'xmlns:cs="http://calendarserver.org/ns/"><d:prop>{props}</d:prop></d:propfind>'
    )


def sync_collection(token: str, *, data: bool = False) -> str:
    """RFC 6578: what changed since ``token`` (hrefs and ETags; with ``data`` the
    objects too). An empty token asks for every member."""
    wanted = "<d:getetag/><c:calendar-data/>" if data else "<d:getetag/>"
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<d:sync-collection xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
        f"<d:sync-token>{escape(token)}</d:sync-token><d:sync-level>1</d:sync-level>"
        f"<d:prop>{wanted}</d:prop></d:sync-collection>"
    )


def calendar_query(start: str, end: str) -> str:
    """RFC 4791: every VEVENT resource with an occurrence in [start, end) (UTC, basic
    format), with its data; the server expands nothing for us."""
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<c:calendar-query xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
        "<d:prop><d:getetag/><c:calendar-data/></d:prop>"
        '<c:filter><c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT">'
        f'<c:time-range start="{start}" end="{end}"/>'
        "</c:comp-filter></c:comp-filter></c:filter></c:calendar-query>"
    )
