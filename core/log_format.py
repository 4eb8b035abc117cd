"""A log format that keeps structured fields: ``message key=value …``.

Log calls pass their details as ``extra={...}``; the default formatter
drops them, which would leave "sweep finished" with nothing to grep for.
"""

from __future__ import annotations

import json
import logging

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class KeyValueFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if fields:
            text += " " + " ".join(
                f"{key}={json.dumps(value, default=str)}" for key, value in sorted(fields.items())
            )
        return text
