"""The support console's landing page: its charts count every tenant's nudges, so
only staff who may view the queue see them, and failures appear by kind, never as text."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from scheduled_sends import failures
from tests.admin.console_data import FAILURES, seed_console

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
    assert "invalid number" not in html and failures.label(failures.FailureKind.REFUSED) not in html

    client.force_login(staff("queue-viewer", "view_scheduledsend"))
    html = client.get(INDEX).content.decode()
    assert 'id="failures"' in html
    # Failures by kind, never the provider's text (which may quote a phone number).
    assert failures.label(failures.FailureKind.REFUSED) in html
    for _, raw in FAILURES:
        assert raw.split("] ")[1] not in html
