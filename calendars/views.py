"""OAuth 2 authorisation-code flow for Google and Microsoft, and the push endpoints.

The signed ``state`` (ten minutes) carries the user's id, the provider and a nonce
kept in the session (with the PKCE verifier), so a callback is accepted only by the
same user, once, for the provider that started it. Tokens are never logged or echoed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import wraps
from types import ModuleType
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from accounts.actions import in_their_language
from calendars.connect import ConnectError, store_oauth_connection
from calendars.models import Provider
from calendars.push import notifications
from core import json_input
from core.config import NudgeConfig
from providers import google, microsoft, oauth
from providers.base import ProviderError

STATE_SALT = "providers.oauth.state"
STATE_MAX_AGE_SECONDS = 600
SESSION_NONCE_KEY = "calendars_oauth_nonce"
SESSION_VERIFIER_KEY = "calendars_oauth_pkce_verifier"


# Each OAuth provider's module holds its scope, endpoints, authorise parameters and
# account name.
FLOWS: dict[str, ModuleType] = {Provider.GOOGLE: google, Provider.MICROSOFT: microsoft}


def _redirect_uri(request: HttpRequest, flow: ModuleType) -> str:
    return request.build_absolute_uri(reverse(f"calendars:{flow.NAME}_callback"))


def _in_their_language(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A signed-in person's step of a connect, in the language of their user area."""

    @wraps(view)
    def page(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        with in_their_language(request.user.pk) as language:
            response = view(request, *args, **kwargs)
        response.headers.setdefault("Content-Language", language)
        return response

    return page


def _text(request: HttpRequest, message: str, status: int = 200) -> HttpResponse:
    """The end of a connect, good or bad, as a page of the user area; the status says which."""
    return render(
        request,
        "portal/calendar_result.html",
        {"message": message, "connected": status < 400},
        status=status,
    )


def available() -> dict[str, bool]:
    """Per OAuth provider: whether this server has its credentials."""
    return {provider: bool(flow.oauth_api().client_id) for provider, flow in FLOWS.items()}


# A route name, so no import of the layer above.
CALENDARS_PAGE = "portal:calendars"


@require_GET
@login_required
@_in_their_language
def connect(request: HttpRequest, provider: str) -> HttpResponse:
    """Send the user to ``provider``'s consent page."""
    flow, label = FLOWS[provider], Provider(provider).label
    if not flow.oauth_api().client_id:
        # Reached by an old link (the page offers no button then): back, saying so.
        messages.error(
            request,
            gettext("%(provider)s is not available on this server.") % {"provider": label},
        )
        return redirect(CALENDARS_PAGE)
    nonce = secrets.token_urlsafe(16)
    request.session[SESSION_NONCE_KEY] = nonce
    verifier, challenge = oauth.pkce_pair()
    request.session[SESSION_VERIFIER_KEY] = verifier
    state = signing.dumps({"u": request.user.pk, "p": flow.NAME, "n": nonce}, salt=STATE_SALT)
    params = {
        "client_id": flow.oauth_api().client_id,
        "redirect_uri": _redirect_uri(request, flow),
        "response_type": "code",
        "scope": flow.SCOPE,
        "state": state,
        **challenge,
        **flow.AUTHORIZE_PARAMS,
    }
    return HttpResponseRedirect(f"{flow.oauth_api().authorize_url}?{urlencode(params)}")


def _state_is_valid(request: HttpRequest, flow: ModuleType) -> bool:
    try:
        state = signing.loads(
            request.GET.get("state", ""), salt=STATE_SALT, max_age=STATE_MAX_AGE_SECONDS
        )
    except signing.BadSignature:  # includes SignatureExpired
        return False
    nonce = request.session.pop(SESSION_NONCE_KEY, None)
    return (
        isinstance(state, dict)
        and state.get("u") == request.user.pk
        and state.get("p") == flow.NAME
        and nonce is not None
        and secrets.compare_digest(str(state.get("n", "")), nonce)
    )


@require_GET
@login_required
@_in_their_language
def callback(request: HttpRequest, provider: str) -> HttpResponse:
    """The provider's answer to ``connect``: store the connection, or say why not."""
    flow, label = FLOWS[provider], Provider(provider).label
    named = {"provider": label}
    if not _state_is_valid(request, flow):
        said = gettext("This sign-in link is invalid or has expired; please connect again.")
        return _text(request, said, 400)
    if request.GET.get("error"):
        said = gettext("%(provider)s was not connected: consent was not given.")
        return _text(request, said % named, 400)
    code = request.GET.get("code", "")
    verifier = request.session.pop(SESSION_VERIFIER_KEY, "")
    if not code or not verifier:
        said = gettext("The provider sent no authorisation code; please connect again.")
        return _text(request, said, 400)
    config = NudgeConfig.from_settings()
    failed = gettext("%(provider)s could not be connected: %(reason)s")
    try:
        grant = oauth.exchange_code(
            flow.oauth_api(),
            code=code,
            redirect_uri=_redirect_uri(request, flow),
            code_verifier=verifier,
            now=timezone.now(),
            timeout=config.calendar_http_timeout_seconds,
        )
        if not grant.refresh_token:
            said = gettext("%(provider)s sent no refresh token; please connect again.")
            return _text(request, said % named, 502)
        account = flow.account_name(grant.access_token, config.calendar_http_timeout_seconds)
    except ProviderError as exc:
        return _text(request, failed % {**named, "reason": exc}, 502)
    try:
        store_oauth_connection(
            request.user.pk, flow.NAME, account=account, grant=grant, config=config
        )
    except ConnectError as exc:  # the per-user calendar cap
        return _text(request, failed % {**named, "reason": exc}, 409)
    said = gettext("%(provider)s connected (%(account)s). Reminders start with the next sync.")
    return _text(request, said % {**named, "account": account})


# Push endpoints, posted to by Google and Graph: CSRF-exempt (no cookies; each
# notification carries its own secret).

MAX_VALIDATION_TOKEN = 1024


@csrf_exempt
@require_POST
def google_push(request: HttpRequest) -> HttpResponse:
    verdict = notifications.google(request.headers, timezone.now())
    # 200 for a replay too: Google retries what is not 2xx.
    return HttpResponse(status=403 if verdict == notifications.Verdict.REJECTED else 200)


@csrf_exempt
@require_POST
def graph_push(request: HttpRequest, lifecycle: bool) -> HttpResponse:
    """Graph's change notifications, or (``lifecycle``) its lifecycle ones."""
    token = request.GET.get("validationToken")
    if token is not None:
        # Graph's handshake when a subscription is made: echo the token as plain text.
        if len(token) > MAX_VALIDATION_TOKEN:
            return HttpResponse(status=400)
        return HttpResponse(token, content_type="text/plain; charset=utf-8")
    # Refused before it is read: the body is read only up to its declared length.
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = -1
    if declared < 0:
        return HttpResponse(status=400)
    if declared > notifications.MAX_GRAPH_BODY_BYTES:
        return HttpResponse(status=413)
    try:
        batch = json_input.parse(request.body)
    except json_input.JsonInputError:
        return HttpResponse(status=400)
    verdicts = notifications.graph(batch, timezone.now(), lifecycle=lifecycle)
    if all(v == notifications.Verdict.REJECTED for v in verdicts):
        return HttpResponse(status=403)
    return HttpResponse(status=202)
