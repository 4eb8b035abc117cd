"""Records what it would send, for tests and benchmarks: a list in-process, and one JSON
line per message (one ``O_APPEND`` write) in ``NUDGE_RECORDING_FILE`` across processes.
``NUDGE_RECORDING_DELAY_SECONDS`` adds a provider-like latency to each send.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from typing import ClassVar

from messaging.channels.base import NudgeMessage, Sender, SendReceipt


@dataclass(frozen=True)
class Recorded:
    address: str
    text: str
    provider_message_id: str
    pid: int


class RecordingChannel(Sender):
    sent: ClassVar[list[Recorded]] = []
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        delay = float(os.environ.get("NUDGE_RECORDING_DELAY_SECONDS", "0") or 0)
        if delay:
            time.sleep(delay)
        record = Recorded(
            address=address,
            text=message.text,
            provider_message_id=f"rec-{uuid.uuid4().hex}",
            pid=os.getpid(),
        )
        with self._lock:
            self.sent.append(record)
        path = os.environ.get("NUDGE_RECORDING_FILE")
        if path:
            line = (json.dumps(asdict(record)) + "\n").encode()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        return SendReceipt(provider_message_id=record.provider_message_id)

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.sent.clear()
