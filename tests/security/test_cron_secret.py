"""The cron routes' secret check: constant time, every method but POST refused.

``tests/channels/test_cron_routes.py`` covers refusals, GET → 405 and a good run;
this adds the rest of the methods and proves the comparison is ``hmac.compare_digest``
on the whole presented token — never ``==``, ``startswith`` or ``in``, whose
running time depends on how much of the secret a guess got right.
"""

from __future__ import annotations

import ast
import hmac
import inspect

import pytest

from core import bearer
from scheduled_sends.models import SweepRun
from sweeps import cron_routes

pytestmark = pytest.mark.django_db

SECRET = "cron-secret-for-security-tests-5f1e9a"
ROUTES = ["/cron/materialize", "/cron/deliver"]


@pytest.fixture(autouse=True)
def cron_secret(settings):
    settings.CRON_SECRET = SECRET
    settings.SECURE_SSL_REDIRECT = False


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("method", ["get", "head", "put", "patch", "delete", "options", "trace"])
def test_every_method_but_post_is_refused_and_runs_nothing(client, route, method):
    response = getattr(client, method)(route, headers={"Authorization": f"Bearer {SECRET}"})
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert not SweepRun.objects.exists()


@pytest.mark.parametrize(
    "presented",
    [SECRET[:-1], SECRET[1:], SECRET.upper(), SECRET + "\x00", "x" * 10_000, SECRET * 2],
)
def test_the_whole_presented_token_goes_to_compare_digest(client, monkeypatch, presented):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    response = client.post("/cron/deliver", headers={"Authorization": f"Bearer {presented}"})
    assert response.status_code == 401
    assert calls == [(presented.strip().encode(), SECRET.encode())]
    assert not SweepRun.objects.exists()


@pytest.mark.parametrize("module", [cron_routes, bearer], ids=["cron_routes", "bearer"])
def test_the_secret_is_never_compared_any_other_way(module):
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            attrs = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            assert "CRON_SECRET" not in attrs and "secret" not in names, ast.unparse(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"startswith", "endswith", "find", "index"}:
                args = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                assert "secret" not in args, ast.unparse(node)


def test_the_secret_never_appears_in_a_refusal(client):
    response = client.post("/cron/deliver", headers={"Authorization": f"Bearer {SECRET[:-2]}"})
    assert SECRET not in response.content.decode()
    assert SECRET[:-2] not in response.content.decode()
