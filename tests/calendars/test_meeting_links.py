"""Issue 22, item 1: the join link in the nudge — only https links to known meeting
hosts, found by Google, Graph and ICS at sync; the location when there is none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from calendars.connect import connect_ics_feed
from core.config import DEFAULT_MEETING_HOSTS, NudgeConfig, host_list
from providers.meeting_links import join_url, without_links
from sweeps.deliver import run_deliver
from sweeps.materialize import run_materialize
from tests.calendars.conftest import events_of, run_sync
from tests.calendars.ics_samples import crlf
from tests.fakes.google_server import google_event
from tests.fakes.microsoft_server import graph_event

HOSTS = host_list(DEFAULT_MEETING_HOSTS)
T9 = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
MEET = "https://meet.google.com/abc-defg-hij"
ZOOM = "https://us02web.zoom.us/j/81234567890?pwd=abcDEF"


def feed(*events: str) -> bytes:
    body = "".join(
        f"""BEGIN:VEVENT
UID:{index}@example.com
DTSTART:20261202T090000Z
DTEND:20261202T093000Z
{lines.strip()}
BEGIN:VALARM
ACTION:DISPLAY
TRIGGER:-PT30M
END:VALARM
END:VEVENT
"""
        for index, lines in enumerate(events)
    )
    return crlf(f"BEGIN:VCALENDAR\nVERSION:2.0\nPRODID:-//test//EN\n{body}END:VCALENDAR\n")


def test_meet_in_location_and_zoom_in_description_reach_the_telegram_nudge(
    make_user, fake_ics, fake_telegram, telegram_settings
):
    """The reported case: a Meet link in the location and a Zoom link in the description
    produced a nudge with neither. Now the nudge's second line is the link (the location's,
    which comes first); an event with a Zoom link only in its description carries that."""
    fake_ics.body = feed(
        f"SUMMARY:Design review\nLOCATION:{MEET}\nDESCRIPTION:Backup: {ZOOM}",
        f"SUMMARY:Customer call\nDESCRIPTION:Join Zoom Meeting\\n{ZOOM}\\nMeeting ID: 812",
    )
    user = make_user(channel="telegram", telegram_chat_id="1001")
    start = datetime(2026, 12, 2, 8, 0, tzinfo=UTC)
    connect_ics_feed(
        user.pk,
        fake_ics.feed_url,
        allow_private=True,
        now=start,
        config=NudgeConfig.from_settings(),
    )
    run_materialize(datetime(2026, 12, 2, 8, 15, tzinfo=UTC))
    run_deliver(T9 - timedelta(minutes=30))

    texts = sorted(message.text for message in fake_telegram.delivered)
    assert texts == [
        f"Customer call starts at 09:00 (in 30 min)\n{ZOOM}",
        f"Design review starts at 09:00 (in 30 min)\n{MEET}",
    ]


def test_a_stranger_cannot_put_a_link_into_our_message(make_user, fake_ics, ics_connection):
    """Unknown hosts, plain http, look-alike hosts and user-info tricks are all dropped;
    the location is kept as text (the message shows it without any address)."""
    fake_ics.body = feed(
        "SUMMARY:Phish\nLOCATION:https://evil.example/meet\nURL:https://zoom.us.evil.example/j/1",
        f"SUMMARY:Plain\nLOCATION:{MEET.replace('https', 'http')}",
        "SUMMARY:Userinfo\nDESCRIPTION:https://meet.google.com@evil.example/x",
        "SUMMARY:Teams\nX-MICROSOFT-SKYPETEAMSMEETINGURL:https://teams.microsoft.com/l/meetup-join/1",
        f"SUMMARY:Google export\nX-GOOGLE-CONFERENCE:{MEET}\nLOCATION:Room 4",
    )
    connection = ics_connection()
    run_sync(connection.user_id)

    stored = {event.title: (event.join_url, event.location) for event in events_of(connection)}
    assert stored == {
        "Phish": ("", "https://evil.example/meet"),
        "Plain": ("", MEET.replace("https", "http")),
        "Userinfo": ("", ""),
        "Teams": ("https://teams.microsoft.com/l/meetup-join/1", ""),
        "Google export": (MEET, "Room 4"),
    }


def test_google_conference_data_hangout_link_and_location(fake_google, google_connection):
    """Google: a video entry point of conferenceData, else hangoutLink, else a link in the
    location or the description (Google's descriptions are HTML)."""
    fake_google.events["primary"] = [
        google_event(
            "conference",
            T9,
            T9 + HOUR,
            summary="Conference",
            location="Room 4",
            conferenceData={
                "entryPoints": [
                    {"entryPointType": "phone", "uri": "tel:+1-555-0100"},
                    {"entryPointType": "video", "uri": ZOOM},
                ]
            },
        ),
        google_event("hangout", T9, T9 + HOUR, summary="Hangout", hangoutLink=MEET),
        google_event("where", T9, T9 + HOUR, summary="Where", location="Café Central, Wien"),
        google_event(
            "pasted",
            T9,
            T9 + HOUR,
            summary="Pasted",
            description=f'<p>Join Zoom Meeting<br><a href="{ZOOM}">{ZOOM}</a></p>',
        ),
        google_event(
            "webex-lookalike",
            T9,
            T9 + HOUR,
            summary="Lookalike",
            location="https://webex.com.evil.example/join",
        ),
    ]
    connection = google_connection()
    run_sync(connection.user_id)

    stored = {event.title: (event.join_url, event.location) for event in events_of(connection)}
    assert stored == {
        "Conference": (ZOOM, "Room 4"),
        "Hangout": (MEET, ""),
        "Where": ("", "Café Central, Wien"),
        "Pasted": (ZOOM, ""),
        "Lookalike": ("", "https://webex.com.evil.example/join"),
    }


def test_graph_online_meeting_and_location_are_asked_for_and_kept(fake_graph, graph_connection):
    """Graph answers only what ``$select`` names (as the fake does), so the request must
    name ``onlineMeeting``, ``onlineMeetingUrl`` and ``location``."""
    teams = "https://teams.microsoft.com/l/meetup-join/19%3ameeting_abc%40thread.v2/0"
    fake_graph.events = [
        graph_event(
            "teams",
            T9,
            T9 + HOUR,
            subject="Teams call",
            onlineMeeting={"joinUrl": teams},
            location={"displayName": "Microsoft Teams Meeting"},
        ),
        graph_event(
            "legacy",
            T9,
            T9 + HOUR,
            subject="Legacy",
            onlineMeetingUrl="https://acme.webex.com/meet/pat",
        ),
        graph_event(
            "room", T9, T9 + HOUR, subject="Room", location={"displayName": "Building 2 / 301"}
        ),
        graph_event(
            "http",
            T9,
            T9 + HOUR,
            subject="Insecure",
            onlineMeeting={"joinUrl": "http://teams.microsoft.com/l/x"},
        ),
    ]
    connection = graph_connection()
    run_sync(connection.user_id)

    stored = {event.title: (event.join_url, event.location) for event in events_of(connection)}
    assert stored == {
        "Teams call": (teams, "Microsoft Teams Meeting"),
        "Legacy": ("https://acme.webex.com/meet/pat", ""),
        "Room": ("", "Building 2 / 301"),
        "Insecure": ("", ""),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Join: {MEET}.", MEET),  # trailing punctuation is not part of the link
        ("https://whereby.com/team-room", "https://whereby.com/team-room"),
        ("https://meet.jit.si/OurRoom", "https://meet.jit.si/OurRoom"),
        ("https://zoom.us/j/1", "https://zoom.us/j/1"),
        ("https://meet.google.com:8443/abc", ""),  # another port
        ("https://user:pw@zoom.us/j/1", ""),  # user info
        ("https://evil.example/#https://zoom.us/j/1", ""),  # a known host in the fragment
        ("https://notzoom.us/j/1", ""),  # not a subdomain
        ("https://meet.goog\u0142e.com/abc", ""),  # a look-alike letter
        ("javascript://meet.google.com/%0aalert(1)", ""),
        ("ftp://meet.google.com/x", ""),
    ],
)
def test_one_function_decides_which_link_may_be_sent(text: str, expected: str) -> None:
    """Issue 22, item 1: only https links to the configured meeting hosts."""
    assert join_url([text], HOSTS) == expected


def test_the_host_list_is_configurable(settings) -> None:
    """CALENDAR_MEETING_HOSTS replaces the list; a bad entry is a config error."""
    settings.CALENDAR_MEETING_HOSTS = "meet.example.org"
    hosts = NudgeConfig.from_settings().meeting_hosts
    assert join_url(["https://meet.example.org/a", MEET], hosts) == "https://meet.example.org/a"
    settings.CALENDAR_MEETING_HOSTS = "https://zoom.us/"
    with pytest.raises(ValueError, match="CALENDAR_MEETING_HOSTS"):
        NudgeConfig.from_settings()


def test_a_location_is_shown_without_any_address() -> None:
    """A location may not bring back a link the check refused."""
    assert without_links("Room 4 (https://evil.example/x) or www.evil.example") == "Room 4 or"
