"""The tenant base model: a row owned by one user, under row-level security."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class TenantModel(models.Model):
    """A row owned by one user; its migration must apply ``tenancy.rls.enable_tenant_rls``."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,  # every tenant table leads an index with user_id instead
    )

    class Meta:
        abstract = True


def tenant_models() -> list[type[models.Model]]:
    """Every installed tenant model (the registry holds no abstract ones)."""
    from django.apps import apps

    return [model for model in apps.get_models() if issubclass(model, TenantModel)]
