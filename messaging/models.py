"""What linking a chat needs: link codes (stored as digests only), opt-in records,
the address directory inbound messages are matched by, and inbound replay guards."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from accounts.models import Channel
from tenancy.models import TenantModel


class LinkCode(TenantModel):
    """A one-time secret proving who is linking a channel: the Telegram deep link's
    secret, or the WhatsApp code sent to ``address``. Expires, and works once."""

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
    """Which user a chat or number belongs to: *not* a tenant table, since an inbound
    message names only its sender. Holds a keyed digest of the address, never the
    address; the owner is re-checked against their settings inside their scope."""

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
    """Inbound Twilio MessageSids already handled, so a replayed STOP or START does
    nothing. Holds no user data; pruned after ``NUDGE_INBOUND_SEEN_DAYS``."""

    message_sid = models.CharField(max_length=64, primary_key=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "portal_twilio_messages_seen"
        indexes = [models.Index(fields=["received_at"], name="portal_twilio_seen_at_idx")]

    def __str__(self) -> str:
        return f"Twilio message {self.message_sid}"


class ChatRecord(TenantModel):
    """What the chat did for its person: a capture (its follow-up, for Undo and the
    hourly cap), an ask-back (its choices, for a numbered reply), a help answer
    (at most one an hour)."""

    class Kind(models.TextChoices):
        CAPTURE = "capture"
        ASK = "ask"
        HELP = "help"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    channel = models.CharField(max_length=16, choices=Channel.choices)
    created_at = models.DateTimeField()
    follow_up_id = models.BigIntegerField(null=True, blank=True)
    title = models.CharField(max_length=200, blank=True, default="")
    choices = ArrayField(models.DateTimeField(), default=list, blank=True)

    class Meta:
        db_table = "chat_records"
        indexes = [
            models.Index(fields=["user", "kind", "created_at"], name="chat_records_user_kind_idx")
        ]

    def __str__(self) -> str:
        return f"chat {self.kind} of user {self.user_id}"
