"""The development channel: prints the nudge instead of sending it."""

from __future__ import annotations

import sys
import uuid
from typing import TextIO

from scheduled_sends.channels.base import NudgeMessage, Sender, SendReceipt


class ConsoleChannel(Sender):
    name = "console"

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        receipt = SendReceipt(provider_message_id=f"console-{uuid.uuid4().hex[:12]}")
        self.stream.write(f"  → {address}: {message.text}\n")
        self.stream.flush()
        return receipt
