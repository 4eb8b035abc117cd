"""A user's API tokens die with a password change or a deactivation (once the user's save
has committed: it may be inside the admin's support scope); signing out is said; revoked
tokens are pruned when ``manage.py prune_inbound`` runs."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone
from django.utils.translation import gettext

from messaging.signals import prune_due
from portal.models import ApiToken
from portal.tokens import REVOKED_TOKENS_KEPT, revoke_api_tokens
from tenancy.scope import support_scope, tenant_scope


def _revoke(user_id: int, how: str) -> None:
    with tenant_scope(user_id):
        revoke_api_tokens(user_id, how, timezone.now())


@receiver(post_save, sender=get_user_model(), dispatch_uid="portal.revoke_tokens_on_user_save")
def revoke_tokens_on_user_save(sender: type, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        return
    # ``set_password`` leaves the new password on ``_password`` until the save
    # after it; a hash upgrade on sign-in clears it first, so it does not count.
    if not instance.is_active:
        how = "account deactivated"
    elif getattr(instance, "_password", None) is not None:
        how = "password changed"
    else:
        return
    user_id = instance.pk
    transaction.on_commit(lambda: _revoke(user_id, how))


@receiver(user_logged_out, dispatch_uid="portal.say_signed_out")
def say_signed_out(sender: type, request: Any, user: Any, **kwargs: Any) -> None:
    """The sign-in page after signing out says so: the message travels in the messages
    cookie, so it outlives logout's session flush."""
    if request is not None:
        messages.info(request, gettext("You are signed out."))


@receiver(prune_due, dispatch_uid="portal.prune_revoked_api_tokens")
def prune_revoked_tokens(sender: type, now: Any, **kwargs: Any) -> tuple[str, int]:
    """``manage.py prune_inbound`` ran: delete every account's API tokens revoked long enough
    ago (the support scope is the only one that reaches every tenant's rows)."""
    with support_scope():
        deleted, _ = ApiToken.objects.filter(revoked_at__lt=now - REVOKED_TOKENS_KEPT).delete()
    return f"API tokens revoked more than {REVOKED_TOKENS_KEPT.days} days ago", deleted
