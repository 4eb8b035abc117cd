"""Re-encrypt every stored calendar secret under the newest key, so an old key can go:
per user, in their scope with the rows locked (a sync storing tokens meanwhile goes first
or waits). A secret no configured key can read is counted and left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model

from calendars.models import CalendarConnection
from providers import crypto
from tenancy.scope import tenant_scope

SECRET_COLUMNS = ("access_token_encrypted", "refresh_token_encrypted", "feed_url_encrypted")


@dataclass
class RotationReport:
    connections: int = 0
    secrets: int = 0
    unreadable: list[int] = field(default_factory=list)  # connection ids

    def summary(self) -> str:
        line = (
            f"rotate_calendar_keys: connections {self.connections}, "
            f"secrets re-encrypted {self.secrets}"
        )
        if self.unreadable:
            ids = ", ".join(str(pk) for pk in self.unreadable)
            line += f", unreadable with every configured key: connections {ids}"
        return line


def _rotate_user(user_id: int, report: RotationReport) -> None:
    with tenant_scope(user_id):
        for connection in CalendarConnection.objects.select_for_update().order_by("pk"):
            report.connections += 1
            changes: dict[str, str] = {}
            try:
                for column in SECRET_COLUMNS:
                    if value := getattr(connection, column):
                        changes[column] = crypto.rotate_ciphertext(value)
            except crypto.SecretDecryptionError:
                report.unreadable.append(connection.pk)
                continue
            if changes:
                CalendarConnection.objects.filter(pk=connection.pk).update(**changes)
                report.secrets += len(changes)


def rotate_calendar_secrets() -> RotationReport:
    report = RotationReport()
    users = get_user_model().objects.order_by("pk").values_list("pk", flat=True)
    for user_id in users.iterator():
        _rotate_user(user_id, report)
    return report
