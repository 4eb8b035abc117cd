"""Staff read every instant of a console page in one zone, their own, with UTC on hover.

The admin activates the viewing staff member's zone (their DeliverySettings,
else UTC) for the request; every instant, title included, is written in it and
names it, with the UTC instant in the ``title`` attribute.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from accounts.models import DeliverySettings
from scheduled_sends.models import SweepRun
from tenancy.scope import tenant_scope

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

STARTED = datetime(2026, 12, 4, 18, 26, 32, tzinfo=UTC)
# A written time and what follows it: "2026-12-04 19:26:32 CET", "2026-12-04 19:26 Europe/Berlin".
WRITTEN_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2})?Z?(?: ([A-Za-z/_+\-0-9]+))?")
TITLE_ATTRIBUTE = re.compile(r'title="\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC"')
DATETIME_ATTRIBUTE = re.compile(r'datetime="\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z"')
BERLIN = {"CET", "CEST"}


@pytest.fixture
def berlin_client(client):
    """A client logged in as staff whose own zone is Europe/Berlin."""
    staff = get_user_model().objects.create_user(
        "berlin", "berlin@example.com", PASSWORD, is_staff=True, is_superuser=True
    )
    with tenant_scope(staff.pk):
        DeliverySettings.objects.create(user=staff, timezone="Europe/Berlin")
    client.force_login(staff)
    return client


def zones_written(page: str) -> list[str | None]:
    """The zone named after each time the page writes, outside its UTC hover attributes."""
    shown = DATETIME_ATTRIBUTE.sub("", TITLE_ATTRIBUTE.sub("", page))
    return [match.group(1) for match in WRITTEN_TIME.finditer(shown)]


def assert_hover_is_utc(page: str, instant: datetime) -> None:
    assert f'datetime="{instant:%Y-%m-%dT%H:%M:%S}Z"' in page
    assert f'title="{instant:%Y-%m-%d %H:%M:%S} UTC"' in page


def test_a_berlin_staff_member_reads_a_run_page_in_cet_with_utc_on_hover(berlin_client):
    run = SweepRun.objects.create(
        sweep=SweepRun.Sweep.DELIVER,
        status=SweepRun.Status.OK,
        as_of=STARTED,
        counts={"sent": 3},
    )
    SweepRun.objects.filter(pk=run.pk).update(
        started_at=STARTED, finished_at=STARTED + timedelta(seconds=4)
    )

    response = berlin_client.get(f"/admin/scheduled_sends/sweeprun/{run.pk}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "deliver ok at 2026-12-04 19:26:32 CET | " in page  # the window's title
    assert "2026-12-04 19:26:32 CET</time></h2>" in page
    assert ">2026-12-04 19:26 CET</time>" in page
    assert_hover_is_utc(page, STARTED)
    assert_hover_is_utc(page, STARTED + timedelta(seconds=4))
    zones = zones_written(page)
    assert zones and set(zones) <= BERLIN, zones
    assert "UTC" not in TITLE_ATTRIBUTE.sub("", page)


def test_a_berlin_staff_member_reads_the_queue_list_in_cet(berlin_client, make_user, make_send):
    owner = make_user("alice", timezone="Europe/Berlin")
    row = make_send(owner, fire_at=STARTED)

    response = berlin_client.get("/admin/scheduled_sends/scheduledsend/")

    assert response.status_code == 200
    page = response.content.decode()
    assert ">2026-12-04 19:26 CET</time>" in page
    assert_hover_is_utc(page, STARTED)
    # The owner's own zone, beside each fire time, is the same zone by its name.
    zones = zones_written(page)
    assert zones and set(zones) <= BERLIN | {"Europe/Berlin"}, zones
    assert "UTC" not in TITLE_ATTRIBUTE.sub("", page)

    detail = berlin_client.get(f"/admin/scheduled_sends/scheduledsend/{row.pk}/change/")
    assert detail.status_code == 200
    zones = zones_written(detail.content.decode())
    assert zones and set(zones) <= BERLIN | {"Europe/Berlin"}, zones


def test_staff_without_settings_read_utc(staff_client):
    run = SweepRun.objects.create(
        sweep=SweepRun.Sweep.DELIVER, status=SweepRun.Status.OK, as_of=STARTED
    )
    SweepRun.objects.filter(pk=run.pk).update(started_at=STARTED)

    page = staff_client.get(f"/admin/scheduled_sends/sweeprun/{run.pk}/change/").content.decode()

    assert "2026-12-04 18:26:32 UTC</time></h2>" in page
    assert set(zones_written(page)) == {"UTC"}


def test_a_berlin_staff_member_reads_tokens_and_opt_ins_in_cet(berlin_client, make_user):
    """Every instant of these pages in one zone: an expiry was written in UTC ("…Z")
    beside a creation in the viewer's zone, unnamed: an hour apart, the same instant."""
    from messaging.models import OptInRecord
    from portal.models import ApiToken

    owner = make_user("alice")
    with tenant_scope(owner.pk):
        token = ApiToken.objects.create(
            user=owner, name="laptop", secret_digest="d" * 64, hint="abcd", expires_at=STARTED
        )
        ApiToken.objects.filter(user=owner).update(created_at=STARTED, last_used_at=STARTED)
        opt_in = OptInRecord.objects.create(
            user=owner, channel="telegram", address="4242", method="/start", recorded_at=STARTED
        )

    for url in (
        "/admin/portal/apitoken/",
        f"/admin/portal/apitoken/{token.pk}/change/",
        "/admin/messaging/optinrecord/",
        f"/admin/messaging/optinrecord/{opt_in.pk}/change/",
    ):
        response = berlin_client.get(url)

        assert response.status_code == 200
        page = response.content.decode()
        assert ">2026-12-04 19:26 CET</time>" in page, url
        assert_hover_is_utc(page, STARTED)
        # The opt-in's own name says its instant in UTC, with the Z.
        zones = zones_written(page.replace(str(opt_in), ""))
        assert zones and set(zones) <= BERLIN, (url, zones)


def test_a_berlin_staff_member_reads_a_persons_settings_in_cet(berlin_client, make_user):
    """When a channel became unreachable and when WhatsApp was opted in: named, like
    "capped at" beside them, not a bare local time."""
    owner = make_user("alice")
    with tenant_scope(owner.pk):
        settings = DeliverySettings.objects.get(user=owner)
        DeliverySettings.objects.filter(pk=settings.pk).update(
            unreachable_channel="telegram", unreachable_at=STARTED, whatsapp_opted_in_at=STARTED
        )

    response = berlin_client.get(f"/admin/accounts/deliverysettings/{settings.pk}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert page.count(">2026-12-04 19:26 CET</time>") == 2
    assert_hover_is_utc(page, STARTED)
