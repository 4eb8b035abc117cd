"""Issue 34, item 7: an admin list takes only the filters, search, date drill-down and
column orders its own page offers; anything else is a 400, never a query or a 500."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from followups.models import FollowUp
from scheduled_sends.models import ScheduledSend
from tenancy.scope import tenant_scope

pytestmark = pytest.mark.django_db

QUEUE = reverse("admin:scheduled_sends_scheduledsend_changelist")


@pytest.fixture(autouse=True)
def _plain_http(settings):
    settings.SECURE_SSL_REDIRECT = False
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


@pytest.fixture
def staff(db) -> Client:
    user = get_user_model().objects.create_user(
        "support", "support@example.com", "pw-for-support-34", is_staff=True, is_superuser=True
    )
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def rows(make_user):
    """A few queue rows and follow-ups, so every list has something to filter."""
    user = make_user("alice")
    now = timezone.now()
    with tenant_scope(user.pk):
        for i in range(3):
            at = now + timedelta(hours=i)
            ScheduledSend.objects.create(
                user=user,
                kind="follow_up",
                ref_id=100 + i,
                fire_at=at,
                intended_at=at,
                subject_starts_at=at + timedelta(minutes=10),
            )
            FollowUp.objects.create(user=user, title=f"Call {i}", due_at=at)
    return user


def changelists() -> list[str]:
    return [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    ]


def own_links(page: str) -> list[str]:
    """The query strings the list page itself links to (filters, drill-down, headers)."""
    return sorted({html.unescape(link) for link in re.findall(r'href="(\?[^"]*)"', page)})


@pytest.mark.parametrize(
    "query",
    [
        "claim_token__isnull=True",  # a field the change form shows, not a filter offered
        "claim_token__isnull=False",
        "last_error__contains=Twilio",
        "provider_message_id__startswith=SM",
        "o=-8.1",  # a column index the list does not have
        "o=99",
        "o=x",
        "o=1.",
        "o=--2",
        "o=1.2.99",
        "state=faild",  # listed every row, as if filtered: a value no filter offers
        "due=soon",
        "owner=alice",
        "owner=",
    ],
)
def test_the_queue_refuses_what_it_does_not_offer(staff, rows, query):
    """issue 34 item 7 (admin lookups it does not offer): ``claim_token__isnull`` and
    ``o=-8.1`` on the scheduled-sends list were answered 200; now 400."""
    response = staff.get(f"{QUEUE}?{query}")
    assert response.status_code == 400, query


@pytest.mark.parametrize(
    "query",
    [
        "kind__exact=%00",  # was a 500: PostgreSQL refuses a NUL in text
        "fire_at__year=99999999999999999999",  # was a 500: OverflowError
        "fire_at__year=9999",  # was a 500: the drill-down's end is year 10000
        "fire_at__year=9999&fire_at__month=12&fire_at__day=31",
        "fire_at__year=2026&fire_at__month=%C2%B2",
        "q=%00",
        "state=%00",
        "owner=%C2%B2",  # was a 500: "²".isdigit(), and int() refuses it
        f"owner={'9' * 5000}",  # was a 500: more digits than int() reads
        "q=" + "+".join(["word"] * 400),  # seconds of conditions over every day partition
    ],
)
def test_hostile_values_are_a_400_not_a_500(staff, rows, query):
    """issue 34 item 7: never a 500 from the query string."""
    assert staff.get(f"{QUEUE}?{query}").status_code == 400, query


def test_every_link_the_list_makes_still_works(staff, rows):
    """issue 34 item 7: the sidebar's filters, the date drill-down and every sortable
    header of every list are offered, so each answers 200."""
    checked = []
    for url in changelists():
        page = staff.get(url)
        assert page.status_code == 200, url
        for link in own_links(page.content.decode()):
            response = staff.get(f"{url}{link}")
            assert response.status_code == 200, f"{url}{link}"
            # A second level: a filter chosen, then another filter or a sort.
            for deeper in own_links(response.content.decode())[:3]:
                assert staff.get(f"{url}{deeper}").status_code == 200, f"{url}{deeper}"
            checked.append(link)
    for made in ("o=", "__exact=", "__gte=", "__year=", "state="):  # each kind was tried
        assert any(made in link for link in checked), made


def test_a_filter_value_the_sidebar_does_not_offer_is_a_400(staff, rows):
    """A sidebar filter's value it does not list was ignored, and the page listed
    every row under a filter that looked applied."""
    assert staff.get(f"{QUEUE}?state=sent").status_code == 200
    assert staff.get(f"{QUEUE}?state=sent-ish").status_code == 400
    tokens = reverse("admin:portal_apitoken_changelist")
    assert staff.get(f"{tokens}?state=revoked").status_code == 200
    assert staff.get(f"{tokens}?state=alive").status_code == 400


def test_a_pasted_error_message_is_still_searched(staff, rows):
    words = "Telegram refused the message: Forbidden: bot was blocked by the user (403)"
    assert staff.get(QUEUE, {"q": words}).status_code == 200


def test_an_owner_past_the_largest_id_lists_nothing(staff, rows):
    response = staff.get(f"{QUEUE}?owner={'9' * 19}")
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []


def test_the_health_and_charts_links_still_work(staff, rows):
    """issue 34 item 7: the console's own links into the queue are offered filters."""
    for query in [
        "state=stuck",
        "due=overdue",
        "state=expired",
        "state=failed",
        "failure_kind__exact=configuration",
        f"owner={rows.pk}",
        "q=alice",
        "fire_at__gte=2026-01-01+00:00:00%2B00:00",
    ]:
        assert staff.get(f"{QUEUE}?{query}").status_code == 200, query
    runs = reverse("admin:scheduled_sends_sweeprun_changelist")
    for query in ["sweep__exact=deliver", "sweep__exact=materialize&status__exact=failed"]:
        assert staff.get(f"{runs}?{query}").status_code == 200, query


HOSTILE = [
    "id__gt=0",
    "user__password__startswith=pbkdf2",
    "pk__in=1,2",
    "o=-99.1",
    "o=0.0.0.0.0",
    "q=%00",
    "x=%00",
    "__=1",
    "e=1&o=7777",
]


def test_no_list_answers_500_to_hostile_parameters(staff, rows):
    """issue 34 item 7: on every registered list, whatever the query string, a 400 or
    a redirect, never a 500."""
    for url in changelists():
        for query in HOSTILE:
            response = staff.get(f"{url}?{query}")
            assert response.status_code in (400, 302), (url, query, response.status_code)
            if response.status_code == 302:  # Django's "?e=1": the unfiltered list's error
                assert dict(parse_qsl(urlsplit(response["Location"]).query)) == {"e": "1"}
