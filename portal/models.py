"""API tokens (long random secrets: a plain SHA-256 digest is all that is kept), each
account's API rate, and the hourly limits of reset mails."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenancy.models import TenantModel


class ApiToken(TenantModel):
    """A per-user bearer token for the JSON API (``portal.tokens``)."""

    name = models.CharField(max_length=80)
    secret_digest = models.CharField(max_length=64)
    hint = models.CharField(max_length=12, help_text="The token's last characters, for display.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # None: the token works until it is revoked (or its owner's password changes).
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_how = models.CharField(max_length=120, blank=True, default="")

    class Meta:
        db_table = "portal_api_tokens"
        indexes = [
            models.Index(fields=["user", "secret_digest"], name="portal_api_tokens_user_idx")
        ]

    def __str__(self) -> str:
        return f"API token {self.name!r} of user {self.user_id}"


class ApiRate(TenantModel):
    """One account's API requests in the current minute, whichever of its tokens a
    request carries (``portal.api.seconds_to_wait``)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    window_at = models.DateTimeField()  # when the current minute began
    requests = models.PositiveIntegerField()  # requests counted in it, this one included

    class Meta:
        db_table = "portal_api_rates"

    def __str__(self) -> str:
        return f"API requests of user {self.user_id} since {self.window_at:%H:%M:%S}Z"


class PasswordResetRequest(models.Model):
    """One asked-for reset mail, for the hourly limits; *not* a tenant table (asked for
    before anyone is known). Keyed digests of the address and client; kept an hour."""

    address_digest = models.CharField(max_length=64)
    client_digest = models.CharField(max_length=64)
    requested_at = models.DateTimeField()

    class Meta:
        db_table = "portal_password_reset_requests"
        indexes = [
            models.Index(fields=["requested_at"], name="portal_pw_reset_at_idx"),
            models.Index(fields=["address_digest"], name="portal_pw_reset_address_idx"),
            models.Index(fields=["client_digest"], name="portal_pw_reset_client_idx"),
        ]

    def __str__(self) -> str:
        return f"password reset request at {self.requested_at:%Y-%m-%d %H:%M}Z"
