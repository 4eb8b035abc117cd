"""CalDAV calendars (RFC 4791): iCloud, Fastmail, Nextcloud, any server by address.

A poll asks RFC 6578 sync-collection what changed since the stored token (else compares
``getctag``): nothing changed is one small request and no parsing. A change, an outrun
expansion or a lost token re-reads the calendar, and its objects go through the ICS
feed's parser, so overrides, floating times and alarms mean the same.

PROPFIND and REPORT go through ``untrusted_fetch`` like an ICS feed: vetted, pinned and
bounded. The password goes as HTTP Basic only to the server's own site (for https, a host
sharing its last two labels, as iCloud's ``pNN-caldav``), and never into an error. A body
with a DOCTYPE is refused, so no entity can be expanded.
"""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urljoin
from xml.sax.saxutils import escape

from providers import untrusted_fetch
from providers.base import (
    ConnectionSnapshot,
    FetchResult,
    MalformedPayload,
    NeedsReauth,
    ProviderError,
    RetryLater,
    raise_for_transient,
)
from providers.ics import (
    EXPAND_AHEAD,
    download_deadline,
    feed_host,
    feed_origin,
    read_as_owner,
    reusable,
)
from providers.untrusted_fetch import Deadline, bounded_body

NAME = "caldav"
NS = {"d": "DAV:", "c": "urn:ietf:params:xml:ns:caldav", "cs": "http://calendarserver.org/ns/"}
_C = "{urn:ietf:params:xml:ns:caldav}"
_CS = "{http://calendarserver.org/ns/}"
REAUTH = "caldav: the server refused the password; it needs your password again"


@dataclass(frozen=True)
class DavResponse:
    """One ``DAV:response`` of a multistatus: its href and its found properties."""

    href: str
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
    """Where the password may be sent (see the module's docstring): for https the host's
    last two labels, else the exact origin."""
    if not url.lower().startswith("https://"):
        return ("", feed_origin(url))
    return ("https", ".".join(feed_host(url).lower().split(".")[-2:]))


@dataclass
class DavClient:
    """One connection's requests: its account, password and guard settings (``snapshot``)
    and its deadline."""

    snapshot: ConnectionSnapshot
    deadline: Deadline

    def _headers(self, url: str, depth: str | None, body: bytes | None) -> dict[str, str]:
        headers = {"Accept": "application/xml, text/xml"}
        if body is not None:
            headers["Content-Type"] = "application/xml; charset=utf-8"
        if depth is not None:
            headers["Depth"] = depth
        snapshot = self.snapshot
        if site_of(url) == site_of(snapshot.feed_url):
            pair = f"{snapshot.account}:{snapshot.access_token}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return headers

    def request(
        self, method: str, url: str, body: str | None = None, depth: str | None = None
    ) -> tuple[int, bytes, str]:
        """(status, body, final url) of one request; redirects followed, each hop vetted.
        401 is NeedsReauth, 429 and 5xx RetryLater (Retry-After honoured)."""
        payload = body.encode() if body is not None else None
        with untrusted_fetch.follow(
            url,
            lambda hop: self._headers(hop, depth, payload),
            allow_private=self.snapshot.allow_private_network,
            deadline=self.deadline,
            timeout=self.snapshot.config.calendar_http_timeout_seconds,
            label=NAME,
            method=method,
            body=payload,
        ) as (answer, final):
            raise_for_transient(answer.status, answer.headers, NAME, datetime.now(UTC))
            if answer.status == 401:
                raise NeedsReauth(REAUTH)
            max_bytes = self.snapshot.config.ics_max_bytes
            content = bounded_body(
                answer, self.deadline, max_bytes, label=NAME, what="the server's answer"
            )
            return answer.status, content, final

    def multistatus(self, method: str, url: str, body: str, depth: str) -> Multistatus:
        return parse_multistatus(method, *self.request(method, url, body, depth))


def parse_multistatus(method: str, status: int, content: bytes, base: str) -> Multistatus:
    """A PROPFIND or REPORT's answer, a 207's multistatus body; hrefs made absolute against
    ``base``. MalformedPayload when it is not one (or declares a DOCTYPE)."""
    if status == 404:
        raise ProviderError("caldav: the calendar is not on the server any more (HTTP 404)")
    if status != 207:
        raise ProviderError(f"caldav: the server answered HTTP {status} to {method}")
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
        props: dict[str, ET.Element] = {}
        for propstat in item.findall("d:propstat", NS):
            # Only the properties found: an ``HTTP/1.1 200 OK`` status line.
            if propstat.findtext("d:status", "", NS).split()[1:2] != ["200"]:
                continue
            for prop in propstat.findall("d:prop", NS):
                props.update((child.tag, child) for child in prop)
        responses.append(DavResponse(href, props))
    return Multistatus(responses, (root.findtext("d:sync-token", "", NS) or "").strip())


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


# The server decides which resources overlap the window; a day either side keeps a
# floating or all-day event the server reads in another zone.
QUERY_MARGIN = timedelta(days=1)
# Why a calendar is read by its window: the server has no sync-collection, or the whole
# calendar is over the size cap (``ICS_MAX_BYTES``).
NO_SYNC, TOO_LARGE = "no_sync", "too_large"


def fetch(
    snapshot: ConnectionSnapshot,
    *,
    now: datetime,
    window_start: datetime,
    window_end: datetime,
) -> FetchResult:
    if not snapshot.feed_url:
        raise ProviderError("caldav: no calendar address stored")
    client = DavClient(snapshot, download_deadline(snapshot))
    try:
        if snapshot.calendar_id:
            return _fetch(client, snapshot, window_start, window_end)
        # An account with no calendar chosen yet: its calendars, for the person to choose
        # from (kept in ``sync_state``; nothing to write, no events).
        if snapshot.sync_state.get("calendars") and not snapshot.full_sync:
            return FetchResult(changed=False, sync_state=snapshot.sync_state)
        choices = discover(client, snapshot.feed_url)
        if not choices:
            raise ProviderError("caldav: the account has no calendar with events")
        return FetchResult(changed=False, sync_state={"calendars": choices})
    finally:
        client.deadline.cancel()


def _fetch(
    client: DavClient, snapshot: ConnectionSnapshot, window_start: datetime, window_end: datetime
) -> FetchResult:
    state = snapshot.sync_state
    url = snapshot.feed_url
    if reusable(snapshot, window_start, window_end):
        unchanged, token = _unchanged(client, url, state)
        if unchanged:
            return FetchResult(changed=False, sync_state={**state, "sync_token": token})
    windowed = str(state.get("windowed") or "")
    read = None if windowed else _whole_calendar(client, url)
    if isinstance(read, str):  # the server said why the whole calendar cannot be read
        windowed, read = read, None
    objects, token, ctag = read or _window(client, url, window_start, window_end + EXPAND_AHEAD)
    if windowed == NO_SYNC:
        token = ""  # polled by its ctag: sync-collection is not there
    result = read_as_owner(objects, snapshot, window_start, window_end)
    name = str(state.get("name", ""))[:255]
    result.sync_state |= {"sync_token": token, "ctag": ctag, "name": name, "windowed": windowed}
    return result


def _whole_calendar(client: DavClient, url: str) -> tuple[list[str], str, str] | str:
    """Every object and a fresh sync token in one request (sync-collection from no token,
    with the data), as a sync client starts; like an ICS feed, the whole calendar, under
    the same size cap. Else why not (``NO_SYNC``, ``TOO_LARGE``): then the window is read
    on its own (``_window``), from then on."""
    try:
        found = client.multistatus("REPORT", url, sync_collection("", data=True), "0")
    except MalformedPayload:
        return TOO_LARGE
    except (NeedsReauth, RetryLater):
        raise
    except ProviderError:
        return NO_SYNC
    if not found.sync_token:
        return NO_SYNC
    return _objects(found), found.sync_token, ""


def _window(
    client: DavClient, url: str, start: datetime, end: datetime
) -> tuple[list[str], str, str]:
    """The objects with an occurrence in the window (calendar-query), and the collection's
    sync token or ctag read first, so a change made in between is seen by the next poll."""
    tags = client.multistatus("PROPFIND", url, propfind("<d:sync-token/><cs:getctag/>"), "0")
    top = tags.responses[0] if tags.responses else None
    token = top.text("{DAV:}sync-token") if top else ""
    ctag = top.text(_CS + "getctag") if top else ""
    query = calendar_query(_basic(start - QUERY_MARGIN), _basic(end + QUERY_MARGIN))
    return _objects(client.multistatus("REPORT", url, query, "1")), token, ctag


def _objects(found: Multistatus) -> list[str]:
    texts = (r.text(_C + "calendar-data") for r in found.responses)
    return [text for text in texts if text]


def _unchanged(client: DavClient, url: str, state: dict[str, Any]) -> tuple[bool, str]:
    """(nothing changed, the token to keep) in one request. A lost token (a 403 or 409
    naming DAV:valid-sync-token) is "changed" with no token, so the window is re-read
    from scratch (once: the next poll starts from the new token)."""
    token = state.get("sync_token") or ""
    if token:
        status, content, final = client.request("REPORT", url, sync_collection(token), "0")
        if status in (403, 409) and b"valid-sync-token" in content:
            return False, ""
        changes = parse_multistatus("REPORT", status, content, final)
        fresh = changes.sync_token or token
        return (not changes.responses and fresh == token), fresh
    ctag = state.get("ctag") or ""
    if not ctag:
        return False, ""
    tags = client.multistatus("PROPFIND", url, propfind("<cs:getctag/>"), "0")
    now_tag = tags.responses[0].text(_CS + "getctag") if tags.responses else ""
    return now_tag == ctag, ""


def _basic(instant: datetime) -> str:
    """UTC in iCalendar's basic format, as CalDAV's time-range wants it."""
    return instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def discover(client: DavClient, server_url: str) -> list[dict[str, str]]:
    """RFC 6764 then RFC 4791: the user's principal (from the address given, else from
    /.well-known/caldav), its calendar home, and the calendars there that hold events
    (each its ``url`` and ``name``)."""
    principal = ""
    for start in (server_url, urljoin(server_url, "/.well-known/caldav")):
        try:
            found = client.multistatus(
                "PROPFIND", start, propfind("<d:current-user-principal/>"), "0"
            )
        except ProviderError as exc:
            if isinstance(exc, NeedsReauth):
                raise
            continue
        hrefs = [h for r in found.responses for h in r.hrefs("{DAV:}current-user-principal")]
        if hrefs:
            principal = urljoin(start, hrefs[0])
            break
    if not principal:
        raise ProviderError("caldav: no CalDAV account found at this address")
    found = client.multistatus("PROPFIND", principal, propfind("<c:calendar-home-set/>"), "0")
    homes = [h for r in found.responses for h in r.hrefs(_C + "calendar-home-set")]
    if not homes:
        raise ProviderError("caldav: the account has no calendar home")
    home = urljoin(principal, homes[0])
    props = "<d:resourcetype/><d:displayname/><c:supported-calendar-component-set/>"
    listing = client.multistatus("PROPFIND", home, propfind(props), "1")
    choices = []
    for item in listing.responses:
        kind = item.props.get("{DAV:}resourcetype")
        if kind is None or kind.find(_C + "calendar") is None:
            continue
        components = item.props.get(_C + "supported-calendar-component-set")
        names = {c.get("name", "").upper() for c in components} if components is not None else set()
        if names and "VEVENT" not in names:
            continue
        name = item.text("{DAV:}displayname") or item.href
        choices.append({"url": item.href, "name": name[:255]})
    return choices
