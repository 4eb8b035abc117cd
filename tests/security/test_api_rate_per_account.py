"""issue 34 finding 3 (API rate limit bypass): the rate was counted on each token's
row, so revoking and re-creating tokens gave one account 3,000 accepted requests in
about 50 s against a limit of 600 a minute. It is the account's now; revoked tokens'
rows are pruned after their retention."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from core.config import NudgeConfig
from portal import api
from portal.models import ApiRate, ApiToken
from portal.tokens import REVOKED_TOKENS_KEPT, new_api_token, revoke_api_tokens
from tenancy.scope import support_scope, tenant_scope

LIMIT = 3


@pytest.fixture(autouse=True)
def _limit(settings):
    settings.NUDGE_API_REQUESTS_PER_MINUTE = LIMIT


def fresh_token(user_id: int) -> str:
    """Revoke the account's tokens and make a new one, as the bypass did."""
    with tenant_scope(user_id):
        revoke_api_tokens(user_id, "revoked by its owner", timezone.now())
        _, plaintext = new_api_token(user_id, "again")
    return plaintext


def get(token: str):
    return Client().get("/api/follow-ups", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_revoking_and_re_creating_tokens_does_not_reset_the_accounts_budget(signed_in):
    """issue 34 finding 3: a new token of the same account starts no fresh minute, and
    another account keeps its own budget."""
    user, _ = signed_in("ana")
    token = fresh_token(user.pk)
    assert [get(token).status_code for _ in range(LIMIT)] == [200] * LIMIT
    assert get(token).status_code == 429
    for _ in range(5):
        refused = get(fresh_token(user.pk))
        assert refused.status_code == 429
        assert 1 <= int(refused["Retry-After"]) <= 60
    with tenant_scope(user.pk):
        assert ApiRate.objects.get(user_id=user.pk).requests == LIMIT + 1 + 5
    other, _ = signed_in("bo")
    assert get(fresh_token(other.pk)).status_code == 200


def test_the_accounts_budget_comes_back_when_its_minute_is_over(signed_in):
    """issue 34 finding 3: a fixed one-minute window per account, as before per token."""
    user, _ = signed_in("cy")
    config = NudgeConfig.from_settings()
    start = timezone.now()

    def wait(at):
        return api.seconds_to_wait(user.pk, at, config)

    assert [wait(start) for _ in range(LIMIT)] == [None] * LIMIT
    assert wait(start + timedelta(seconds=45)) == 15
    assert wait(start + timedelta(seconds=60)) is None  # a new minute, counted from here
    assert [wait(start + timedelta(seconds=61)) for _ in range(LIMIT - 1)] == [None] * (LIMIT - 1)
    assert wait(start + timedelta(seconds=62)) == 58


def test_prune_inbound_deletes_tokens_revoked_past_their_retention(make_user, capsys):
    """issue 34 finding 3: revoked token rows do not pile up; those revoked more than
    30 days ago are deleted by ``manage.py prune_inbound``, every account's, and live
    ones and recently revoked ones stay."""
    now = timezone.now()
    kept, gone = [], []
    for name in ("dee", "eli"):
        user = make_user(name)
        with tenant_scope(user.pk):
            live, _ = new_api_token(user.pk, "live")
            recent, _ = new_api_token(user.pk, "recent")
            old, _ = new_api_token(user.pk, "old")
            ApiToken.objects.filter(pk=recent.pk).update(
                revoked_at=now - REVOKED_TOKENS_KEPT + timedelta(hours=1)
            )
            ApiToken.objects.filter(pk=old.pk).update(
                revoked_at=now - REVOKED_TOKENS_KEPT - timedelta(hours=1)
            )
        kept += [live.pk, recent.pk]
        gone.append(old.pk)
    call_command("prune_inbound", "--older-than", "7")
    assert "deleted 2 API tokens revoked more than 30 days ago" in capsys.readouterr().out
    with support_scope():
        assert sorted(ApiToken.objects.values_list("pk", flat=True)) == sorted(kept)
