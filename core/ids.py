"""Row ids are PostgreSQL bigints: a number beyond one (from a URL, a payload) names no
row and is refused here, before it can reach the database."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet

MAX_ID = 2**63 - 1  # the largest bigint
_Row = TypeVar("_Row", bound=Model)


def valid_id(value: int) -> bool:
    return 0 < value <= MAX_ID


def owned(rows: QuerySet[_Row], user_id: int, pk: int) -> QuerySet[_Row]:
    """The user's row ``pk`` among ``rows`` (none if out of range); run it in the user's scope."""
    if not valid_id(pk):
        return rows.none()
    return rows.filter(user_id=user_id, pk=pk)
