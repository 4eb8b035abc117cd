"""Channels for the soak's process-level faults, configured from the environment.

The real WhatsApp and Telegram channels (talking to the fake providers), with
one twist on the N-th send of the process (``NUDGE_SOAK_EPISODE_AT``):

* ``sleep-before``: stamp a marker file, then sleep before calling the
  provider — the test SIGKILLs the process while it holds the rest of its
  batch (claimed, untried) and one row marked ``send_started_at``;
* ``hold-after``: call the provider (the first send from the N-th on that
  succeeds), then stamp the marker (with the
  process's database backend pid — the run's own connection, read when the
  channel is built on the run's thread, since sends happen on worker
  threads) and wait — the test terminates that
  backend with ``pg_terminate_backend``, so the settle-up that follows fails.

The marker is written atomically (write, then rename) so the test never
reads half of it.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path

from messaging.channels.base import NudgeMessage, SendReceipt
from messaging.telegram.send import TelegramChannel
from messaging.whatsapp.send import WhatsAppChannel

_sends = itertools.count(1)
_held: list[int] = []  # the first successful send at or after N, once


def _backend_pid() -> int | None:
    from django.db import connection

    raw = connection.connection  # the live psycopg connection; no query is made
    return raw.info.backend_pid if raw is not None else None


def _mark(path: Path, **fields: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), **fields}))
    tmp.rename(path)


class _Episode:
    def __init__(self) -> None:
        super().__init__()
        self.run_backend_pid = _backend_pid()

    def send(self, address: str, message: NudgeMessage) -> SendReceipt:
        number = next(_sends)
        mode = os.environ.get("NUDGE_SOAK_EPISODE", "")
        at = int(os.environ.get("NUDGE_SOAK_EPISODE_AT", "0"))
        marker = Path(os.environ.get("NUDGE_SOAK_MARKER", "soak-marker"))
        if number == at and mode == "sleep-before":
            _mark(marker, address=address, backend_pid=self.run_backend_pid)
            time.sleep(120)  # killed long before this ends
        receipt = super().send(address, message)  # type: ignore[misc]
        if number >= at and mode == "hold-after" and not _held:
            _held.append(number)
            _mark(
                marker,
                address=address,
                provider_message_id=receipt.provider_message_id,
                backend_pid=self.run_backend_pid,
            )
            proceed = marker.with_suffix(".proceed")
            deadline = time.monotonic() + 30
            while not proceed.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return receipt


class EpisodeWhatsAppChannel(_Episode, WhatsAppChannel):
    pass


class EpisodeTelegramChannel(_Episode, TelegramChannel):
    pass


EPISODE_BACKENDS = {
    "whatsapp": f"{__name__}.EpisodeWhatsAppChannel",
    "telegram": f"{__name__}.EpisodeTelegramChannel",
}
