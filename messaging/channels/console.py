"""The development channel: prints the nudge instead of sending it. Outside development it
refuses (behind ``accounts.rules``): it would log private titles and record them delivered.
"""

from __future__ import annotations

import sys
import uuid

from core.deployment import NOT_IN_PRODUCTION, console_channel_allowed
from messaging.channels.base import (
    NudgeMessage,
    PermanentSendError,
    Sender,
    SendReceipt,
)


class ConsoleChannel(Sender):
    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        if not console_channel_allowed():
            raise PermanentSendError(NOT_IN_PRODUCTION)
        receipt = SendReceipt(provider_message_id=f"console-{uuid.uuid4().hex[:12]}")
        sys.stdout.write(f"  → {address}: {message.text}\n")
        sys.stdout.flush()
        return receipt
