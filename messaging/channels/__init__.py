"""Delivery channels: one small interface (``base.Sender``), one module each."""

from messaging.channels.base import (
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    Sender,
    SendError,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
    get_sender,
)

__all__ = [
    "NudgeMessage",
    "PermanentSendError",
    "RateLimited",
    "SendError",
    "SendReceipt",
    "Sender",
    "TransientSendError",
    "UnconfirmedSendError",
    "get_sender",
]
