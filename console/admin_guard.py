"""What every admin page of the support console shares: narrow query strings, audited reads.

* **Lookups only on what the page shows.** Django's admin accepts a query-string
  filter on any local field (``?sync_state__contains=…``,
  ``?feed_url_encrypted__startswith=…``): a yes/no oracle on columns the page
  deliberately hides. Here a lookup must start at a field the admin displays
  (list columns, list filters, date hierarchy, form fields); across a relation
  only its key may be matched. Anything else is Django's "disallowed lookup" (400).
* **Staff reads of tenant rows leave a trace.** Every list or detail page of a
  tenant model logs who looked, at which rows, with which filters, to the
  ``nudge.admin.audit`` logger.

``NudgeAdminSite.register`` mixes this into every registered admin, so a new
admin class cannot forget it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import IGNORED_PARAMS
from django.core.exceptions import FieldDoesNotExist
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponseBase

from core.admin_readonly import audit_logger
from tenancy.models import TenantModel

# Across a relation, only the related row's key may be matched.
_RELATION_TAILS = {"id", "pk", "exact", "in", "isnull"}
# Page mechanics, not filters; the search term ``q`` is a filter and is kept.
_NOT_FILTERS = (set(IGNORED_PARAMS) | {"p"}) - {"q"}


class ShownFieldsOnly:
    """Mixed into every ModelAdmin by ``NudgeAdminSite.register``."""

    def _shown_names(self, request: HttpRequest | None) -> tuple[set[str], set[str]]:
        """(field names the admin shows, parameter names of its own simple filters)."""
        names = {name for name in self.list_display if isinstance(name, str)}
        names |= set(self.fields or ())
        if self.date_hierarchy:
            names.add(self.date_hierarchy)
        parameters = set()
        list_filter = self.get_list_filter(request) if request is not None else self.list_filter
        for item in list_filter:
            if isinstance(item, type) and issubclass(item, admin.SimpleListFilter):
                parameters.add(item.parameter_name)
            elif isinstance(item, (list, tuple)):
                names.add(item[0])
            else:
                names.add(item)
        return names, parameters

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        names, parameters = self._shown_names(request)
        head, *tail = lookup.split(LOOKUP_SEP)
        if lookup in parameters:
            return True
        if head not in names:
            return False
        try:
            field = self.model._meta.get_field(head)
        except FieldDoesNotExist:
            return False
        if field.is_relation and not set(tail) <= _RELATION_TAILS:
            return False
        return super().lookup_allowed(lookup, value, request)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None:
            rows = [obj.pk for obj in changelist.result_list]
            _audit(request, self.model, rows)
        return response

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any):
        response: HttpResponseBase = super().change_view(request, object_id, *args, **kwargs)
        if response.status_code == 200:
            _audit(request, self.model, [object_id])
        return response


def _audit(request: HttpRequest, model: type, rows: list[Any]) -> None:
    if not issubclass(model, TenantModel):
        return
    filters = {key: value for key, value in request.GET.items() if key not in _NOT_FILTERS}
    audit_logger.info(
        "staff viewed tenant rows",
        extra={
            "staff_user_id": request.user.pk,
            "staff_username": request.user.get_username(),
            "model": model._meta.label,
            "rows": [str(row) for row in rows],
            "filters": filters,
        },
    )


def guarded(admin_class: type[admin.ModelAdmin]) -> type[admin.ModelAdmin]:
    """``admin_class`` with the shared guard in front of it."""
    if issubclass(admin_class, ShownFieldsOnly):
        return admin_class
    return type(
        admin_class.__name__, (ShownFieldsOnly, admin_class), {"__module__": admin_class.__module__}
    )
