"""manage.py rotate_calendar_keys: run after prepending a new key to CALENDAR_TOKEN_KEYS;
once it reports no unreadable secrets (else it exits 1), the old key can be removed.

Per user, in their scope with the rows locked (a sync storing tokens meanwhile goes first
or waits). A secret no configured key can read is counted and left as it is.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from calendars.models import CalendarConnection
from core.command_line import NudgeCommand
from providers import crypto
from tenancy.scope import tenant_scope

SECRET_COLUMNS = ("access_token_encrypted", "refresh_token_encrypted", "feed_url_encrypted")


class Command(NudgeCommand):
    help = "Re-encrypt every stored calendar token and feed address under the newest key."

    def handle(self, *args, **options) -> None:
        connections, rewritten, unreadable = 0, 0, []
        users = get_user_model().objects.order_by("pk").values_list("pk", flat=True)
        try:
            for user_id in users.iterator():
                with tenant_scope(user_id):
                    for connection in CalendarConnection.objects.select_for_update().order_by("pk"):
                        connections += 1
                        try:
                            changes = {
                                column: crypto.rotate_ciphertext(value)
                                for column in SECRET_COLUMNS
                                if (value := getattr(connection, column))
                            }
                        except crypto.SecretDecryptionError:
                            unreadable.append(str(connection.pk))
                            continue
                        if changes:
                            CalendarConnection.objects.filter(pk=connection.pk).update(**changes)
                            rewritten += len(changes)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        line = f"rotate_calendar_keys: connections {connections}, secrets re-encrypted {rewritten}"
        if unreadable:
            line += f", unreadable with every configured key: connections {', '.join(unreadable)}"
        self.stdout.write(line)
        if unreadable:
            raise CommandError("some secrets are unreadable; keep the old keys until they are")
