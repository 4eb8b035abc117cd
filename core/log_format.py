"""A log format that keeps the ``extra={...}`` fields: ``message key=value …``; one record
is one line (control characters escaped, so outside input cannot forge a log line)."""

from __future__ import annotations

import json
import logging
import re

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape(text: str) -> str:
    """``text`` with every control character written as its JSON escape (``\\n``)."""
    return _CONTROL.sub(lambda match: json.dumps(match.group())[1:-1], text)


class KeyValueFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        record.asctime = self.formatTime(record, self.datefmt)
        text = escape(self.formatMessage(record))
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if fields:
            text += " " + " ".join(
                f"{escape(str(key))}={json.dumps(value, default=str)}"
                for key, value in sorted(fields.items())
            )
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        for block in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)):
            if block:
                text += "".join("\n  " + escape(line) for line in block.splitlines())
        return text
