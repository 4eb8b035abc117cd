"""The support console's landing page: its charts count every tenant's nudges, so
only staff who may view the queue see them, and failures appear as reason codes."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from nudgeproject.console import reason_code
from tests.admin.console_data import FAILURE_REASONS, seed_console

INDEX = reverse("admin:index")


def staff(username: str, *permissions: str):
    user = get_user_model().objects.create_user(username, is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def test_staff_without_the_queue_permission_see_no_charts(client, make_user, settings):
    """issue 23 item 5: staff without permissions saw every tenant's failure texts
    on the landing page's failure chart."""
    settings.SECURE_SSL_REDIRECT = False
    seed_console([make_user("alice").pk], timezone.now())
    client.force_login(staff("helpdesk"))
    html = client.get(INDEX).content.decode()
    assert 'id="failures"' not in html
    assert "invalid number" not in html and "provider error" not in html

    client.force_login(staff("queue-viewer", "view_scheduledsend"))
    html = client.get(INDEX).content.decode()
    assert 'id="failures"' in html
    assert "provider error 400" in html
    assert "+15550100" not in html  # the provider's text quoted a number: never shown


def test_failure_reasons_become_codes():
    """issue 23 item 5: failure reasons are shown as reason codes, never provider text."""
    assert {reason_code(reason) for reason in FAILURE_REASONS} == {
        "provider error 400",
        "provider error 403",
    }
    quoted = "[21211] The 'To' number +14155550100 is not valid"
    assert reason_code(quoted) == "provider error 21211"
    assert reason_code("[timeout] read timed out — it may have been delivered; not resent") == (
        "unconfirmed"
    )
    assert reason_code("something a provider said about +14155550100") == "other"
