"""What every admin page of the support console shares: narrow query strings, audited reads.

* A list takes only the parameters its own page makes; anything else (a lookup on a
  column it only shows, so no ``?feed_url_encrypted__startswith=…`` oracle on hidden
  columns; a value its own filter does not list, ``?state=faild``; ``?o=-8.1``; a NUL
  byte; a year past 9998) is a 400, never a query, never a 500.
* Every list or detail page of a tenant model logs who read which rows, with which
  filters, to ``nudge.admin.audit``.

``NudgeAdminSite.register`` mixes this into every registered admin.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from django.contrib.admin import SimpleListFilter
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.views.main import IGNORED_PARAMS, ORDER_VAR, SEARCH_VAR, ChangeList
from django.http import HttpRequest, HttpResponseBase

from core.admin_readonly import audit
from tenancy.models import TenantModel

# Page mechanics, not filters; the search term ``q`` is a filter and is kept.
_NOT_FILTERS = (set(IGNORED_PARAMS) | {"p"}) - {"q"}


# One column of ``o``: its index in the list, "-" first for descending.
_ORDER_PART = re.compile(r"-?[0-9]{1,3}")
# The date hierarchy's parts, as its links write them. A year stops at 9998: the
# drill-down's end is the next year, and 10000 is past what a date can hold.
_DATE_PARTS = {"year": (1, 9998), "month": (1, 12), "day": (1, 31)}
MAX_SEARCH_WORDS = 30  # a pasted error message is about 15


class OfferedFiltersOnly(ChangeList):
    """A change list that takes only the parameters its page makes (see above)."""

    def get_filters(self, request: HttpRequest):
        asked = set(self.get_filters_params())
        self._refuse_hostile_values(request)
        self._refuse_unoffered_ordering()
        self._refuse_unoffered_search()
        generated = self._check_date_hierarchy(asked)
        specs, has_filters, remaining, duplicates, active = super().get_filters(request)
        self._refuse_unoffered_choices(specs)
        # What no filter took, the date hierarchy's own bounds apart, is not offered.
        unoffered = sorted((set(remaining) & asked) - generated)
        if unoffered:
            raise DisallowedModelAdminLookup(f"Filtering by {unoffered[0]} is not offered")
        return specs, has_filters, remaining, duplicates, active

    def _refuse_hostile_values(self, request: HttpRequest) -> None:
        # PostgreSQL refuses a NUL in text, as an error no filter expects.
        for key, values in request.GET.lists():
            if "\x00" in key or any("\x00" in value for value in values):
                raise DisallowedModelAdminLookup("a NUL byte in the query string")

    def _refuse_unoffered_choices(self, specs: list) -> None:
        # Our own list filters ignore a value they do not list: the page would show
        # every row as if filtered (``?state=faild``, ``?owner=alice``).
        offered = {
            spec.parameter_name: {str(value) for value, _ in spec.lookup_choices}
            for spec in specs
            if isinstance(spec, SimpleListFilter)
        }
        for list_filter in self.list_filter:
            if isinstance(list_filter, type) and issubclass(list_filter, SimpleListFilter):
                name = list_filter.parameter_name
                value = self.params.get(name)
                if value is not None and value not in offered.get(name, ()):
                    raise DisallowedModelAdminLookup(f"{name}={value} is not offered")

    def _refuse_unoffered_ordering(self) -> None:
        order = self.params.get(ORDER_VAR)
        if not order:
            return  # no ordering, or the header's "remove sorting" link (o=)
        parts = order.split(".")
        if len({part.removeprefix("-") for part in parts}) < len(parts):
            raise DisallowedModelAdminLookup(f"{ORDER_VAR}={order} names a column twice")
        for part in parts:
            if not _ORDER_PART.fullmatch(part):
                raise DisallowedModelAdminLookup(f"{ORDER_VAR}={order} is not a column order")
            index = int(part.removeprefix("-"))
            if index >= len(self.list_display):
                raise DisallowedModelAdminLookup(f"{ORDER_VAR}={order} names no column")
            name = self.list_display[index]
            sortable = self.sortable_by is None or name in self.sortable_by
            if not (sortable and self.get_ordering_field(name)):
                raise DisallowedModelAdminLookup(f"{ORDER_VAR}={order} names no sortable column")

    def _refuse_unoffered_search(self) -> None:
        search = self.params.get(SEARCH_VAR)
        if search and not self.search_fields:
            raise DisallowedModelAdminLookup("this list has no search")
        # Each word is one more condition on every column over every day partition:
        # 400 words took seconds, 2,000 minutes, inside support's transaction.
        if search and len(search.split()) > MAX_SEARCH_WORDS:
            raise DisallowedModelAdminLookup(f"a search of more than {MAX_SEARCH_WORDS} words")

    def _check_date_hierarchy(self, asked: set[str]) -> set[str]:
        """The bounds the date hierarchy adds (when its year is asked), after
        checking its parts are the numbers its links write."""
        if not self.date_hierarchy:
            return set()
        for part, (low, high) in _DATE_PARTS.items():
            value = self.params.get(f"{self.date_hierarchy}__{part}")
            if value is None:
                continue
            if not (value.isascii() and value.isdigit() and low <= int(value) <= high):
                raise DisallowedModelAdminLookup(f"{part}={value} is not a date part")
        if f"{self.date_hierarchy}__year" not in asked:
            return set()
        return {f"{self.date_hierarchy}__gte", f"{self.date_hierarchy}__lt"}


class SupportGuard:
    """Mixed into every ModelAdmin by ``NudgeAdminSite.register``."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return behind(OfferedFiltersOnly, super().get_changelist(request, **kwargs))

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None:
            audit_read(request, self.model, [obj.pk for obj in changelist.result_list])
        return response

    def change_view(self, request: HttpRequest, object_id: str, *args: Any, **kwargs: Any):
        response: HttpResponseBase = super().change_view(request, object_id, *args, **kwargs)
        if response.status_code == 200:
            audit_read(request, self.model, [object_id])
        return response


def audit_read(
    request: HttpRequest, model: type, rows: list[Any], filters: dict | None = None
) -> None:
    """Log a staff user's read of tenant rows, with its filters (by default the query
    string's, page mechanics left out)."""
    if not issubclass(model, TenantModel):
        return
    if filters is None:
        filters = {key: value for key, value in request.GET.items() if key not in _NOT_FILTERS}
    audit(request, "staff viewed tenant rows", model._meta.label, [str(r) for r in rows], filters)


@functools.cache
def behind(guard: type, cls: type) -> type:
    """``cls`` (Django's, or an admin's own) with ``guard`` mixed in front of it."""
    if issubclass(cls, guard):
        return cls
    return type(cls.__name__, (guard, cls), {"__module__": cls.__module__})
