"""Support's view of API tokens, with revoke (logged to the audit logger and the admin's
history); never a token's digest."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString

from core.admin_readonly import ReadOnlyAdmin, audit
from core.display import instant_column, when
from portal.models import ApiToken
from portal.tokens import revoke_api_tokens


class TokenStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [("live", "live"), ("expired", "expired"), ("revoked", "revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> QuerySet[ApiToken]:
        now = timezone.now()
        if self.value() == "revoked":
            return queryset.exclude(revoked_at=None)
        if self.value() == "expired":
            return queryset.filter(revoked_at=None, expires_at__lte=now)
        if self.value() == "live":
            return queryset.filter(revoked_at=None).exclude(expires_at__lte=now)
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    created = instant_column("created_at", "created at")
    last_used = instant_column("last_used_at", "last used at")
    revoked = instant_column("revoked_at", "revoked at")
    list_display = (
        "user",
        "name",
        "hint",
        "created",
        "last_used",
        "expires",
        "revoked",
        "revoked_how",
    )
    list_filter = (TokenStateFilter,)
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email", "name")
    ordering = ("-created_at",)
    # An allow-list: the digest is never shown.
    fields = (
        "user",
        "name",
        "hint",
        "created",
        "last_used",
        "expires",
        "revoked",
        "revoked_how",
    )
    readonly_fields = fields
    actions = ("revoke",)

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj: ApiToken) -> SafeString:
        return when(obj.expires_at)

    has_revoke_permission = ReadOnlyAdmin.may_change

    @admin.action(permissions=["revoke"], description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        # Runs in the admin's support scope, which may update any tenant's tokens.
        now = timezone.now()
        tokens = list(queryset.filter(revoked_at=None).only("pk", "user_id", "name"))
        how = f"revoked by support ({request.user.get_username()})"
        revoked = sum(revoke_api_tokens(t.user_id, how, now, [t.pk]) for t in tokens)
        for token in tokens:
            self.log_change(request, token, "Revoked by support.")
        rows = [str(token.pk) for token in tokens]
        audit(request, "staff revoked API tokens", ApiToken._meta.label, rows, {})
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)
