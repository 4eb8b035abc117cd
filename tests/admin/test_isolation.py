"""The admin's cross-tenant view stays inside the admin, for staff, for one request.

Probe views (tests/admin/urls.py) report ``current_scope()`` and the database's
``current_user``; ``record_scopes`` records the scope every query ran in.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.models import DeliverySettings
from console.admin_site import SUPPORT_SCOPED_ATTR
from scheduled_sends.models import ScheduledSend
from tenancy.scope import current_scope

from .conftest import PASSWORD, db_role, record_scopes
from .urls import ProbeError

ADMIN_INDEX = reverse("admin:index")
CHANGELIST = reverse("admin:scheduled_sends_scheduledsend_changelist")
SUPPORT = "support_scope()"
TENANT_TABLES = (
    "scheduled_sends",
    "delivery_settings",
    "calendar_connections",
    "calendar_events",
    "follow_ups",
)

pytestmark = pytest.mark.urls("tests.admin.urls")


def assert_outside_every_scope() -> None:
    """The connection is back to the plain application role and sees no tenant row."""
    assert current_scope() is None
    assert db_role() == settings.NUDGE_DB_LOGIN_ROLE
    assert ScheduledSend.objects.count() == 0
    assert DeliverySettings.objects.count() == 0


def test_staff_sees_every_tenants_rows(staff_client, make_user, make_send):
    sends = [make_send(make_user(name)) for name in ("alice", "bob", "carol")]

    response = staff_client.get(CHANGELIST)

    assert {obj.pk for obj in response.context["cl"].result_list} == {s.pk for s in sends}
    html = response.content.decode()
    assert all(name in html for name in ("alice", "bob", "carol"))


def test_staff_admin_queries_run_in_the_support_scope(staff_client, make_user, make_send):
    make_send(make_user("alice"))

    with record_scopes() as seen:
        response = staff_client.get(CHANGELIST)

    assert response.status_code == 200
    tenant_queries = [(scope, sql) for scope, sql in seen if any(t in sql for t in TENANT_TABLES)]
    assert tenant_queries
    assert {scope for scope, _ in tenant_queries} == {SUPPORT}


def test_admin_view_runs_as_the_support_role_for_staff(staff_client):
    assert staff_client.get("/test-admin-probe/").json() == {
        "scope": SUPPORT,
        "role": settings.NUDGE_DB_SUPPORT_ROLE,
    }


def test_support_scope_does_not_leak_past_the_request(staff_client, make_user, make_send):
    make_send(make_user("alice"))

    assert staff_client.get(CHANGELIST).status_code == 200
    assert_outside_every_scope()
    assert staff_client.get("/test-admin-probe/").json()["scope"] == SUPPORT
    assert_outside_every_scope()


def test_support_scope_does_not_leak_past_an_exception(staff_client, make_user, make_send):
    make_send(make_user("alice"))

    with pytest.raises(ProbeError):
        staff_client.get("/test-admin-boom/")

    assert_outside_every_scope()


def test_non_admin_view_never_runs_in_the_support_scope_even_for_staff(staff_client):
    assert staff_client.get("/test-probe/").json() == {
        "scope": None,
        "role": settings.NUDGE_DB_LOGIN_ROLE,
    }


def test_the_projects_own_views_never_enter_the_support_scope(staff_client, make_user, make_send):
    """/healthz reads the queue under its own scope; a staff session changes nothing."""
    make_send(make_user("alice"))

    with record_scopes() as seen:
        response = staff_client.get(reverse("healthz"))

    assert response.status_code in (200, 503)
    assert SUPPORT not in {scope for scope, _ in seen}
    assert_outside_every_scope()


def test_anonymous_requests_never_enter_the_scope(client, make_user, make_send):
    make_send(make_user("alice"))

    with record_scopes() as seen:
        for url in (ADMIN_INDEX, CHANGELIST, "/test-admin-probe/"):
            response = client.get(url)
            assert response.status_code == 302
            assert response.url.startswith(reverse("admin:login"))
        assert client.get("/test-probe/").json()["scope"] is None

    assert {scope for scope, _ in seen} <= {None}


def test_non_staff_users_never_enter_the_scope(client, make_user, make_send):
    member = make_user("alice")
    make_send(member)
    client.force_login(member)

    with record_scopes() as seen:
        for url in (ADMIN_INDEX, CHANGELIST, "/test-admin-probe/"):
            response = client.get(url)
            assert response.status_code == 302, url
        assert client.get("/test-probe/").json()["scope"] is None

    assert seen, "the session and user lookups should have been recorded"
    assert {scope for scope, _ in seen} == {None}


def test_inactive_staff_never_enter_the_scope(client, db):
    staff = get_user_model().objects.create_user("gone", is_staff=True, is_active=False)
    client.force_login(staff)

    with record_scopes() as seen:
        assert client.get("/test-admin-probe/").status_code == 302

    assert {scope for scope, _ in seen} <= {None}


def test_login_and_logout_never_enter_the_scope(client, support_user):
    login_url = reverse("admin:login")

    with record_scopes() as seen:
        assert client.get(login_url).status_code == 200
        response = client.post(
            login_url, {"username": "support", "password": PASSWORD, "next": ADMIN_INDEX}
        )
        assert response.status_code == 302
    assert seen and {scope for scope, _ in seen} == {None}

    with record_scopes() as seen:
        response = client.post(reverse("admin:logout"))
        assert response.status_code == 200
    assert seen and {scope for scope, _ in seen} == {None}
    assert_outside_every_scope()


def _walk(resolver: URLResolver, prefix: str = ""):
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route, pattern.callback


@pytest.mark.urls("nudgeproject.urls")
def test_no_route_outside_the_admin_is_admin_wrapped():
    """Every project route not mounted under the admin is free of its scope wrapper."""
    outside = [
        (route, callback)
        for route, callback in _walk(get_resolver())
        if not route.startswith(ADMIN_INDEX.lstrip("/"))
    ]
    for route, callback in outside:
        assert not getattr(callback, SUPPORT_SCOPED_ATTR, False), route
        assert not hasattr(callback, "admin_site"), route
