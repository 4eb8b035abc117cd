"""What linking a chat needs: one-time link codes, opt-in records, the address
directory inbound messages are matched by, and the replay guards of inbound
updates.

Secrets are stored as SHA-256 digests only (they are long and random, so a
plain digest is enough); the plaintext is shown once and never kept.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from accounts.models import Channel
from tenancy.models import TenantModel


class LinkCode(TenantModel):
    """A one-time secret proving who is linking a channel.

    Telegram: the deep-link payload's secret part. WhatsApp: the six-digit
    code sent to ``address``. Expires, and works once (``used_at``).
    """

    channel = models.CharField(max_length=16, choices=Channel.choices)
    secret_digest = models.CharField(max_length=64)
    address = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "portal_link_codes"
        indexes = [models.Index(fields=["user", "channel"], name="portal_link_codes_user_idx")]

    def __str__(self) -> str:
        return f"{self.channel} link code for user {self.user_id}"


class OptInRecord(TenantModel):
    """When, how and for which address a user agreed to messages; and when they withdrew."""

    channel = models.CharField(max_length=16, choices=Channel.choices)
    address = models.CharField(max_length=64)
    method = models.CharField(max_length=120)
    recorded_at = models.DateTimeField()
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawn_how = models.CharField(max_length=120, blank=True, default="")

    class Meta:
        db_table = "portal_opt_ins"
        indexes = [models.Index(fields=["user", "channel"], name="portal_opt_ins_user_idx")]

    def __str__(self) -> str:
        return f"{self.channel} opt-in of user {self.user_id} at {self.recorded_at:%Y-%m-%d %H:%M}Z"


class ChannelAddress(models.Model):
    """Which user a Telegram chat or WhatsApp number belongs to: *not* a tenant table.

    An inbound message ("/stop", "STOP") names only its sender, and no tenant
    scope can be chosen before the owner is known. The directory holds a
    keyed digest of the address (HMAC with SECRET_KEY), never the address, and
    the owner is re-checked against their own settings inside their scope.
    """

    channel = models.CharField(max_length=16, choices=Channel.choices)
    address_digest = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "portal_channel_addresses"
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "address_digest"], name="portal_channel_addresses_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.channel} address of user {self.user_id}"


class TelegramUpdateSeen(models.Model):
    """Update ids already handled, so a replayed update does nothing. Holds no user data."""

    update_id = models.BigIntegerField(primary_key=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "portal_telegram_updates_seen"

    def __str__(self) -> str:
        return f"Telegram update {self.update_id}"


class TwilioMessageSeen(models.Model):
    """Inbound Twilio MessageSids already handled, so a captured signed STOP or START
    replayed later does nothing. Holds no user data; pruned after
    ``NUDGE_INBOUND_SEEN_DAYS`` (Twilio's signature has no timestamp, so the table
    is what refuses a replay)."""

    message_sid = models.CharField(max_length=64, primary_key=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "portal_twilio_messages_seen"
        indexes = [models.Index(fields=["received_at"], name="portal_twilio_seen_at_idx")]

    def __str__(self) -> str:
        return f"Twilio message {self.message_sid}"
