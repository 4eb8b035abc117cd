"""Delivery channels: one small interface (``base.Channel``), one module each."""

from scheduled_sends.channels.base import (
    Channel,
    NudgeMessage,
    PermanentSendError,
    RateLimited,
    SendError,
    SendReceipt,
    TransientSendError,
    UnconfirmedSendError,
    get_channel,
)

__all__ = [
    "Channel",
    "NudgeMessage",
    "PermanentSendError",
    "RateLimited",
    "SendError",
    "SendReceipt",
    "TransientSendError",
    "UnconfirmedSendError",
    "get_channel",
]
