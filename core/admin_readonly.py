"""The support console's read-only admin: one definition for every page that only shows;
and the staff audit log every app's admin writes to."""

from __future__ import annotations

import logging

from django.contrib import admin
from django.http import HttpRequest

# Who looked at or changed which tenant rows (``console.admin_guard`` logs reads).
audit_logger = logging.getLogger("nudge.admin.audit")


def audit(request: HttpRequest, message: str, label: str, rows: list[str], filters: dict) -> None:
    """Log what a staff user did (``message``) to which tenant rows of the model ``label``."""
    audit_logger.info(
        message,
        extra={
            "staff_user_id": request.user.pk,
            "staff_username": request.user.get_username(),
            "model": label,
            "rows": rows,
            "filters": filters,
        },
    )


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable with the view permission; nothing is added, edited or deleted here (an
    action that changes something has a permission of its own, like "resync")."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def may_change(self, request: HttpRequest) -> bool:
        """Whether the user holds the model's change permission: what an action that
        changes rows takes (``has_<action>_permission = ReadOnlyAdmin.may_change``)."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")
