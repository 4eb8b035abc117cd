"""Snooze and Done as they arrive from a chat: a Telegram button, a WhatsApp quick
reply or the words "snooze" / "done". Who acts is the address's owner; a button's
token verifies only for that address. The act runs in the owner's tenant scope,
and the answer is in the owner's language (the site's for an unknown address).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from django.utils import translation

from accounts.models import DeliverySettings
from core.config import NudgeConfig
from followups.actions import FollowUpChange, change_follow_up
from messaging import addresses, nudge_actions
from messaging.action_tokens import Claim, verify
from messaging.nudge_actions import Act, ActResult
from tenancy.scope import tenant_scope

SNOOZE_WORDS = frozenset({"SNOOZE", "LATER"})
DONE_WORDS = frozenset({"DONE", "DONE ✓"})


def _in_words(result: ActResult) -> ActResult:
    """The answer with its text written out in the active language (a plain str)."""
    return replace(result, text=str(result.text))


def _language(owner: int) -> str:
    """The owner's language (inside their scope); English before they have settings."""
    found = DeliverySettings.objects.filter(user_id=owner).values_list("language", flat=True)
    return found.first() or "en"


def _act(owner: int, claim: Claim, via: str, now: datetime, config: NudgeConfig) -> ActResult:
    with tenant_scope(owner):
        language = _language(owner)
    # The answer's words are formatted inside the act: the owner's language is active.
    with translation.override(language):
        with tenant_scope(owner):
            if claim.act == Act.SNOOZE:
                result = nudge_actions.snooze(owner, claim.send_id, via, now, config)
            else:
                result = nudge_actions.record_done(owner, claim.send_id, via, now)
        if result.follow_up_id is not None:
            change_follow_up(owner, result.follow_up_id, FollowUpChange(done=True), now)
        return _in_words(result)


def tap(channel: str, address: str, token: str, now: datetime, config: NudgeConfig) -> ActResult:
    """A button pressed in ``address``'s chat: verify its token, then act as its owner."""
    claim = verify(token, address)
    owner = addresses.owner_of(channel, address)
    if claim is None or owner is None:
        return _in_words(ActResult(nudge_actions.NOT_HERE))
    return _act(owner, claim, channel, now, config)


def word_of(text: str) -> str | None:
    """``snooze`` or ``done`` for a reply that is one of those words, else None."""
    word = " ".join(text.split()).upper().rstrip(".!")
    if word in SNOOZE_WORDS:
        return Act.SNOOZE
    if word in DONE_WORDS:
        return Act.DONE
    return None


def reply(
    channel: str, address: str, act: str, now: datetime, config: NudgeConfig
) -> ActResult | None:
    """A typed "snooze" / "done": acts on the sender's last nudge within the reply window;
    None when the address belongs to nobody (not ours to answer)."""
    owner = addresses.owner_of(channel, address)
    if owner is None:
        return None
    with tenant_scope(owner):
        send_id = nudge_actions.last_sent(owner, channel, now)
    if send_id is None:
        with tenant_scope(owner), translation.override(_language(owner)):
            return _in_words(ActResult(nudge_actions.NOTHING_TO_ACT_ON))
    return _act(owner, Claim(act, send_id), channel, now, config)
