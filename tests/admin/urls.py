"""The project's routes plus probes that report the scope a request runs in.

Test-only: ``probe`` is an ordinary view; ``admin_probe`` and ``admin_boom`` go
through the admin site's ``admin_view`` like every admin page does.
"""

from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import path

from nudgeproject import urls as project_urls
from tenancy.scope import current_scope


class ProbeError(RuntimeError):
    pass


def probe(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        role = cursor.fetchone()[0]
    return JsonResponse({"scope": current_scope(), "role": role})


def boom(request: HttpRequest) -> JsonResponse:
    raise ProbeError("raised inside the admin view")


urlpatterns = [
    path("test-probe/", probe),
    path("test-admin-probe/", admin.site.admin_view(probe)),
    path("test-admin-boom/", admin.site.admin_view(boom)),
    *project_urls.urlpatterns,
]
