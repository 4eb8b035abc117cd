"""The scheduled-sends changelist: columns, filters, search, ordering, and the actions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduled_sends.failures import INTERRUPTED_REASON, FailureKind
from scheduled_sends.models import ScheduledSend
from scheduled_sends.queue.states import State, in_state
from tenancy.scope import support_scope

from .conftest import lease, reload, state_now

CHANGELIST = reverse("admin:scheduled_sends_scheduledsend_changelist")


def result_ids(response) -> set[int]:
    assert response.status_code == 200, response.content[:500]
    return {obj.pk for obj in response.context["cl"].result_list}


def test_list_shows_owner_subject_times_and_state(
    staff_client, make_user, make_send, make_event, make_follow_up
):
    alice = make_user("alice", timezone="Europe/Berlin")
    event = make_event(alice, "Dentist", starts_at=timezone.now() + timedelta(minutes=20))
    send = make_send(
        alice,
        kind="event",
        ref_id=event.pk,
        fire_at=datetime(2020, 7, 1, 12, 0, tzinfo=UTC),
        channel="whatsapp",
        provider_message_id="SMabc123",
        delivery_status="delivered",
        attempts=2,
        last_error="rate limited",
    )
    follow_up = make_follow_up(alice, "Call the bank")
    make_send(alice, kind="follow_up", ref_id=follow_up.pk)

    response = staff_client.get(CHANGELIST)

    assert result_ids(response) >= {send.pk}
    html = response.content.decode()
    for text in (
        "alice",
        "Dentist",
        "Call the bank",
        "2020-07-01 12:00:00 UTC",
        "2020-07-01 14:00 Europe/Berlin",
        "retrying",
        "rate limited",
        "SMabc123",
        "delivered",
    ):
        assert text in html, text


def test_subject_titles_cost_one_query_per_page(
    staff_client, make_user, make_send, make_event, make_follow_up
):
    alice = make_user("alice")
    connection_ = None
    for n in range(6):
        event = make_event(alice, f"Event {n}", connection=connection_)
        connection_ = event.connection
        make_send(alice, kind="event", ref_id=event.pk)
    for n in range(4):
        make_send(alice, kind="follow_up", ref_id=make_follow_up(alice, f"Follow-up {n}").pk)

    with CaptureQueriesContext(connection) as queries:
        response = staff_client.get(CHANGELIST)

    assert len(result_ids(response)) == 10
    subject_queries = [
        q["sql"] for q in queries if "calendar_events" in q["sql"] or "follow_ups" in q["sql"]
    ]
    assert len(subject_queries) == 1, subject_queries
    html = response.content.decode()
    assert all(f"Event {n}" in html for n in range(6))
    assert all(f"Follow-up {n}" in html for n in range(4))


@pytest.mark.parametrize("state", State.values)
def test_state_filter(staff_client, make_user, make_state_rows, state):
    rows = make_state_rows(make_user("alice"))

    response = staff_client.get(CHANGELIST, {"state": state})

    assert result_ids(response) == {rows[state].pk}
    listed = response.context["cl"].result_list[0]
    assert listed.queue_state == state
    assert f'<td class="field-state_label">{state}</td>' in response.content.decode()


def test_every_row_is_in_exactly_one_state(make_user, make_state_rows):
    """The eight conditions never overlap and leave no row out: ``with_state`` (a CASE
    that takes the first match) cannot hide an overlap, so each condition is checked alone."""
    rows = make_state_rows(make_user("alice"))
    now = timezone.now()
    with support_scope():
        for state in State:
            selected = set(
                ScheduledSend.objects.filter(in_state(state, now, lease())).values_list(
                    "pk", flat=True
                )
            )
            assert selected == {rows[state].pk}, state
        labelled = dict(
            ScheduledSend.objects.with_state(now, lease()).values_list("pk", "queue_state")
        )
    assert labelled == {row.pk: state for state, row in rows.items()}


def test_kind_and_channel_filters(staff_client, make_user, make_send):
    alice = make_user("alice")
    event = make_send(alice, kind="event", channel="telegram")
    follow_up = make_send(alice, kind="follow_up", channel="whatsapp")

    # The parameters the sidebar's links make (a bare ``kind=`` is not offered: 400).
    assert result_ids(staff_client.get(CHANGELIST, {"kind__exact": "event"})) == {event.pk}
    assert result_ids(staff_client.get(CHANGELIST, {"kind__exact": "follow_up"})) == {follow_up.pk}
    assert result_ids(staff_client.get(CHANGELIST, {"channel__exact": "telegram"})) == {event.pk}
    assert staff_client.get(CHANGELIST, {"kind": "event"}).status_code == 400
    assert result_ids(staff_client.get(CHANGELIST, {"channel__exact": "whatsapp"})) == {
        follow_up.pk
    }


def test_fire_time_range_filter(staff_client, make_user, make_send):
    alice = make_user("alice")
    early = make_send(alice, fire_at=datetime(2020, 1, 1, 9, 0, tzinfo=UTC))
    late = make_send(alice, fire_at=datetime(2020, 3, 1, 9, 0, tzinfo=UTC))

    response = staff_client.get(
        CHANGELIST,
        {"fire_at__gte": "2020-02-01T00:00:00+00:00", "fire_at__lt": "2020-04-01T00:00:00+00:00"},
    )
    assert result_ids(response) == {late.pk}
    response = staff_client.get(CHANGELIST, {"fire_at__year": "2020", "fire_at__month": "1"})
    assert result_ids(response) == {early.pk}


def test_search_by_username_email_and_provider_message_id(staff_client, make_user, make_send):
    alice = make_user("alice")
    alice.email = "alice@corp.example"
    alice.save()
    bob = make_user("bob")
    alice_send = make_send(alice, provider_message_id="SM111")
    bob_send = make_send(bob, provider_message_id="SM222")

    assert result_ids(staff_client.get(CHANGELIST, {"q": "alic"})) == {alice_send.pk}
    assert result_ids(staff_client.get(CHANGELIST, {"q": "corp.example"})) == {alice_send.pk}
    assert result_ids(staff_client.get(CHANGELIST, {"q": "SM222"})) == {bob_send.pk}
    # Message ids match exactly, not by fragment.
    assert result_ids(staff_client.get(CHANGELIST, {"q": "SM2"})) == set()


def test_problems_come_first_then_newest_fire_time(staff_client, make_user, make_state_rows):
    rows = make_state_rows(make_user("alice"))

    response = staff_client.get(CHANGELIST)

    order = [obj.pk for obj in response.context["cl"].result_list]
    problems = {rows[s].pk for s in ("failed", "stuck", "retrying")}
    assert set(order[:3]) == problems
    fire_times = [reload(obj).fire_at for obj in response.context["cl"].result_list]
    assert fire_times[:3] == sorted(fire_times[:3], reverse=True)
    assert fire_times[3:] == sorted(fire_times[3:], reverse=True)


def test_change_form_is_read_only(staff_client, make_user, make_send):
    send = make_send(make_user("alice"), last_error="boom")
    url = reverse("admin:scheduled_sends_scheduledsend_change", args=[send.pk])

    assert staff_client.get(url).status_code == 200
    response = staff_client.post(url, {"last_error": "edited"})

    assert response.status_code == 403
    assert reload(send).last_error == "boom"


# --- actions ---------------------------------------------------------------------


def run_action(client, action: str, rows, *, follow: bool = False, **data):
    """Choose the action in the changelist: the first step, before confirmation."""
    return client.post(
        CHANGELIST,
        {"action": action, "index": 0, "_selected_action": [r.pk for r in rows], **data},
        follow=follow,
    )


def confirm_action(client, action: str, rows, *, follow: bool = False, **data):
    """Post the confirmation page back, as its form does."""
    return client.post(
        CHANGELIST,
        {"action": action, "post": "yes", "_selected_action": [r.pk for r in rows], **data},
        follow=follow,
    )


def log_messages(obj) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=str(obj.pk), action_flag=CHANGE).values_list(
            "change_message", flat=True
        )
    )


def test_release_claim_confirms_then_releases_fenced_on_token(
    staff_client, make_user, make_state_rows
):
    rows = make_state_rows(make_user("alice"))
    stuck = rows["stuck"]

    page = run_action(staff_client, "release_claim", [stuck])

    assert page.status_code == 200
    html = page.content.decode()
    assert "Release stuck claims" in html
    assert str(stuck.claim_token) in html
    assert reload(stuck).claim_token == stuck.claim_token  # nothing yet

    done = confirm_action(
        staff_client, "release_claim", [stuck], **{f"claim_token_{stuck.pk}": stuck.claim_token}
    )

    assert done.status_code == 302
    row = reload(stuck)
    assert (row.claimed_at, row.claim_token, row.send_started_at) == (None, None, None)
    assert state_now(row) == "pending"
    assert log_messages(stuck) == [f"Released stuck claim {stuck.claim_token} (support)."]


def test_release_claim_refuses_a_claim_that_changed_since_confirmation(
    staff_client, make_user, make_state_rows
):
    stuck = make_state_rows(make_user("alice"))["stuck"]

    response = confirm_action(
        staff_client,
        "release_claim",
        [stuck],
        **{f"claim_token_{stuck.pk}": uuid.uuid4()},
        follow=True,
    )

    assert reload(stuck).claim_token == stuck.claim_token
    assert "its claim changed after the confirmation page" in response.content.decode()
    assert log_messages(stuck) == []


def test_release_of_a_row_whose_send_had_started_needs_send_again(
    staff_client, make_user, make_send
):
    """Such a row may have reached the user; releasing it sends it again."""
    now = timezone.now()
    mid_send = make_send(
        make_user("alice"),
        fire_at=now - timedelta(minutes=2),
        claimed_at=now - lease() - timedelta(minutes=1),
        claim_token=uuid.uuid4(),
        send_started_at=now - lease() - timedelta(seconds=50),
    )
    token = {f"claim_token_{mid_send.pk}": mid_send.claim_token}

    page = run_action(staff_client, "release_claim", [mid_send])
    html = page.content.decode()
    assert "may already have been sent" in html
    assert f'name="send_again_{mid_send.pk}"' in html

    response = confirm_action(staff_client, "release_claim", [mid_send], follow=True, **token)
    assert "may already have been delivered" in response.content.decode()
    assert reload(mid_send).send_started_at is not None

    confirm_action(
        staff_client, "release_claim", [mid_send], **token, **{f"send_again_{mid_send.pk}": "yes"}
    )
    row = reload(mid_send)
    assert (row.claimed_at, row.claim_token, row.send_started_at) == (None, None, None)
    assert "Its send had started at" in log_messages(mid_send)[0]


def test_release_claim_refuses_live_claims(staff_client, make_user, make_state_rows):
    claimed = make_state_rows(make_user("alice"))["claimed"]

    page = run_action(staff_client, "release_claim", [claimed])
    assert "still live" in page.content.decode()
    confirm_action(
        staff_client,
        "release_claim",
        [claimed],
        **{f"claim_token_{claimed.pk}": claimed.claim_token},
    )

    assert reload(claimed).claim_token == claimed.claim_token


def test_retry_now_inside_grace(staff_client, make_user, make_state_rows):
    failed = make_state_rows(make_user("alice"))["failed"]

    page = run_action(staff_client, "retry_now", [failed])
    assert page.status_code == 200
    assert "Retry failed sends now" in page.content.decode()
    assert reload(failed).outcome == "failed"

    done = confirm_action(staff_client, "retry_now", [failed])

    assert done.status_code == 302
    row = reload(failed)
    assert (row.outcome, row.last_error, row.sent_at, row.claim_token) == (None, "", None, None)
    assert len(log_messages(failed)) == 1


def test_a_refusal_is_retried_without_a_warning_and_loses_its_kind(
    staff_client, make_user, make_send
):
    """The provider said no: it cannot have arrived, whatever its words happen to say."""
    now = timezone.now()
    refused = make_send(
        make_user("alice"),
        fire_at=now - timedelta(minutes=2),
        outcome="failed",
        attempts=1,
        last_error="[400] Telegram bad request: it may have been delivered elsewhere",
        failure_kind=FailureKind.REFUSED,
    )

    page = run_action(staff_client, "retry_now", [refused]).content.decode()
    assert "retrying may send it twice" not in page

    confirm_action(staff_client, "retry_now", [refused])
    row = reload(refused)
    assert (row.outcome, row.failure_kind, row.last_error) == (None, "", "")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (FailureKind.INTERRUPTED, INTERRUPTED_REASON),
        (
            FailureKind.UNCONFIRMED,
            "[timeout] Twilio did not answer in time — it may have been delivered; not resent",
        ),
        # The kind decides, not the words: support is warned whatever last_error says.
        (FailureKind.UNUSABLE_RECEIPT, "[protocol] Telegram said something odd"),
    ],
)
def test_retry_of_a_send_that_may_have_arrived_warns_and_asks_again(
    staff_client, make_user, make_send, kind, reason
):
    now = timezone.now()
    doubtful = make_send(
        make_user("alice"),
        fire_at=now - timedelta(minutes=2),
        outcome="failed",
        attempts=1,
        last_error=reason,
        failure_kind=kind,
        send_started_at=now - timedelta(minutes=2),
    )

    page = run_action(staff_client, "retry_now", [doubtful]).content.decode()
    assert "Warning: " in page
    assert "retrying may send it twice" in page
    assert "1 row may already have reached the user" in page
    assert f'name="send_again_{doubtful.pk}"' in page

    # A plain "yes" is not enough: the row stays failed, and support is told why.
    response = confirm_action(staff_client, "retry_now", [doubtful], follow=True)
    assert (
        "may already have reached the user; tick &#x27;send again&#x27;"
        in response.content.decode()
    )
    assert reload(doubtful).outcome == "failed"

    confirm_action(staff_client, "retry_now", [doubtful], **{f"send_again_{doubtful.pk}": "yes"})
    assert reload(doubtful).outcome is None


def test_retry_of_a_plain_rejection_asks_once(staff_client, make_user, make_state_rows):
    failed = make_state_rows(make_user("alice"))["failed"]  # "400 invalid number"

    page = run_action(staff_client, "retry_now", [failed]).content.decode()

    assert "Warning: " not in page
    assert f'name="send_again_{failed.pk}"' not in page


def test_bulk_actions_say_how_many_rows_they_touch(staff_client, make_user, make_state_rows):
    rows = make_state_rows(make_user("alice"))
    selected = [rows["pending"], rows["retrying"], rows["sent"]]

    page = run_action(staff_client, "skip", selected).content.decode()

    assert (
        "This will change 2 rows of the 3 rows you selected; "
        "1 row will be left alone (reasons below)." in page
    )
    assert 'value="Yes, skip 2 rows"' in page
    assert "refused: it is already settled (sent)" in page
    none = run_action(staff_client, "release_claim", [rows["sent"]]).content.decode()
    assert "This will change none of the 1 row you selected." in none


def test_retry_now_refuses_past_grace(staff_client, make_user, make_send, settings):
    late = make_send(
        make_user("alice"),
        fire_at=timezone.now() - timedelta(minutes=settings.NUDGE_GRACE_MINUTES + 1),
        outcome="failed",
        last_error="400",
    )

    page = run_action(staff_client, "retry_now", [late])
    assert "grace window" in page.content.decode()
    response = confirm_action(staff_client, "retry_now", [late], follow=True)

    assert "past the 15-minute grace window" in response.content.decode()
    assert reload(late).outcome == "failed"
    assert log_messages(late) == []


def test_skip_with_reason(staff_client, make_user, make_state_rows):
    rows = make_state_rows(make_user("alice"))
    targets = [rows["pending"], rows["stuck"]]

    page = run_action(staff_client, "skip", targets)
    assert page.status_code == 200
    assert 'name="reason"' in page.content.decode()

    before = timezone.now()
    done = confirm_action(staff_client, "skip", targets, reason="user asked to stop")

    assert done.status_code == 302
    for target in targets:
        row = reload(target)
        assert row.outcome == "skipped"
        assert row.sent_at >= before
        assert row.last_error == "skipped by support: user asked to stop"
        assert log_messages(target) == ["skipped by support: user asked to stop"]


def test_skip_needs_a_reason_and_refuses_settled_rows(staff_client, make_user, make_state_rows):
    rows = make_state_rows(make_user("alice"))

    page = confirm_action(staff_client, "skip", [rows["pending"]], reason="  ")
    assert page.status_code == 200
    assert "This field is required." in page.content.decode()
    assert reload(rows["pending"]).outcome is None

    confirm_action(staff_client, "skip", [rows["sent"], rows["claimed"]], reason="dup")
    assert reload(rows["sent"]).outcome == "sent"
    assert reload(rows["claimed"]).outcome is None


@pytest.mark.parametrize("action", ["release_claim", "retry_now", "skip"])
def test_actions_need_the_change_permission(
    client, viewer_user, make_user, make_state_rows, action
):
    rows = make_state_rows(make_user("alice"))
    client.force_login(viewer_user)

    listing = client.get(CHANGELIST)
    assert listing.status_code == 200
    assert f'value="{action}"' not in listing.content.decode()

    page = run_action(client, action, list(rows.values()))
    assert 'name="post"' not in page.content.decode()  # no confirmation page
    confirm_action(
        client,
        action,
        list(rows.values()),
        reason="nope",
        **{f"claim_token_{r.pk}": r.claim_token for r in rows.values() if r.claim_token},
    )

    for state, row in rows.items():
        now = reload(row)
        assert (now.outcome, now.claim_token, now.last_error) == (
            row.outcome,
            row.claim_token,
            row.last_error,
        ), state
    assert not LogEntry.objects.exists()


def test_model_permissions_not_superuser_grant_the_actions(client, make_user, make_state_rows):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    staff = get_user_model().objects.create_user("agent", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="change_scheduledsend"))
    client.force_login(staff)
    failed = make_state_rows(make_user("alice"))["failed"]

    assert run_action(client, "retry_now", [failed]).status_code == 200
    assert confirm_action(client, "retry_now", [failed]).status_code == 302
    assert reload(failed).outcome is None


def test_staff_without_view_permission_is_refused(client, make_user):
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_user("nobody", is_staff=True)
    client.force_login(staff)
    assert client.get(CHANGELIST).status_code == 403
