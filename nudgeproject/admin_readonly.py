"""The support console's read-only admin: one definition for every page that only shows."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """Viewable with the view permission; nothing is added, edited or deleted here.

    Actions that change something (a resync flag, a queue transition) take
    the change permission explicitly; the object's form stays read-only.
    """

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
