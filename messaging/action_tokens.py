"""A button's token, ``<act><row id in hex>.<MAC>``: a salted HMAC-SHA256 over the act, the
row and the address it went to, cut to 16 bytes, so a token copied into another chat or
edited verifies nowhere. At most 41 bytes, inside Telegram's 64-byte ``callback_data``.
"""

from __future__ import annotations

import base64
import hmac
import re
from dataclasses import dataclass

from django.utils.crypto import salted_hmac

SNOOZE = "snooze"
DONE = "done"
# A captured follow-up's buttons (the id is the follow-up's) and an ask-back's
# choices (the id is the ask's record times ``chat_words.MAX_CHOICES`` plus the choice).
UNDO = "undo"
RETIME = "retime"
PICK = "pick"
_SALT = "nudge.scheduled_sends.action_tokens"
_ACT_LETTER = {SNOOZE: "s", DONE: "d", UNDO: "u", RETIME: "t", PICK: "p"}
_LETTER_ACT = {letter: act for act, letter in _ACT_LETTER.items()}
_MAC_CHARS = 22  # 16 bytes, base64url without padding
_TOKEN = re.compile(r"([sdutp])([0-9a-f]{1,16})\.([A-Za-z0-9_-]{22})")


@dataclass(frozen=True)
class Claim:
    """What a verified token names."""

    act: str  # SNOOZE, DONE, UNDO, RETIME or PICK
    send_id: int  # the queue row; for UNDO / RETIME the follow-up, for PICK the choice


def _mac(act: str, send_id: int, address: str) -> str:
    digest = salted_hmac(_SALT, f"{act}:{send_id}:{address.strip()}", algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")[:_MAC_CHARS]


def sign(act: str, send_id: int, address: str) -> str:
    """The token for ``act`` on queue row ``send_id``, sent to ``address``."""
    return f"{_ACT_LETTER[act]}{send_id:x}.{_mac(act, send_id, address)}"


def verify(token: str, address: str) -> Claim | None:
    """The act and row a token names, when it was made for ``address``; else None."""
    match = _TOKEN.fullmatch(token or "")
    if match is None:
        return None
    act, send_id = _LETTER_ACT[match[1]], int(match[2], 16)
    if not hmac.compare_digest(match[3], _mac(act, send_id, address)):
        return None
    return Claim(act, send_id)
