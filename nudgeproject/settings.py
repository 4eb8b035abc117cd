"""Settings, all from the environment (and an optional ``.env`` file). Nothing secret has a
production default: only in development (``DATABASE_URL`` unset: an embedded PostgreSQL in
the checkout, ``tenancy/embedded_server.py``) does ``SECRET_KEY`` fall back to a random key
kept in ``var/``."""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path
from urllib.parse import unquote, urlsplit

import environ
from csp.constants import NONCE, NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from core.config import knob_settings
from tenancy.bootstrap import RoleNames, template_database_name

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = BASE_DIR / "var"

# ``env`` reads the public settings (docs/OPERATIONS.md "Settings"; at most 30; each one
# explained in .env.example); ``seam`` what only development, tests and benchmarks set.
env = environ.Env()
seam = environ.Env()
if (BASE_DIR / ".env").is_file():
    environ.Env.read_env(BASE_DIR / ".env")


def _flag(name: str, value: str) -> bool:
    """A true/false setting; anything else is refused rather than read as false (a
    mistyped BEHIND_TLS_PROXY=ture would send every page into a redirect loop)."""
    if value.strip().lower() in environ.Env.BOOLEAN_TRUE_STRINGS:
        return True
    if value.strip().lower() in ("false", "off", "no", "n", "0", ""):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


DEBUG = _flag("DEBUG", env.str("DEBUG", default="false"))
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default="").rstrip("/")
_public = urlsplit(PUBLIC_BASE_URL)
if PUBLIC_BASE_URL and (
    _public.scheme not in ("https", "http") or not _public.hostname or _public.query
):
    raise ImproperlyConfigured(
        "PUBLIC_BASE_URL must be the site's https:// origin, e.g. https://nudge.example.com"
    )
ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS",
    default=[_public.hostname] if _public.hostname else ["localhost", "127.0.0.1", "[::1]"],
)
# The console channel (it prints nudges) outside development: staging or CI.
ALLOW_CONSOLE_CHANNEL = _flag(
    "ALLOW_CONSOLE_CHANNEL", seam.str("ALLOW_CONSOLE_CHANNEL", default="false")
)

# --- Database -------------------------------------------------------------
EMBEDDED_DATABASE = not env.str("DATABASE_URL", default="")
if EMBEDDED_DATABASE:
    from tenancy.embedded_server import database_settings

    # Started on the first connection, not here (tenancy/backend).
    _database = database_settings(STATE_DIR)
else:
    _database = env.db_url("DATABASE_URL")
    # A Unix-socket directory may arrive percent-encoded in the host part.
    _database["HOST"] = unquote(_database.get("HOST") or "")
    if _database.get("ENGINE") != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres://…).")
# Creates test databases as the owner role (tenancy/backend).
_database["ENGINE"] = "tenancy.backend"
_database.setdefault("OPTIONS", {})
_database["OPTIONS"].setdefault("application_name", "nudge")
_database["CONN_MAX_AGE"] = 0  # a connection per request; pool in front (pgbouncer) if needed
_database["TEST"] = {
    # A template carrying the schema grants a NOINHERIT owner needs (tenancy/bootstrap.py).
    "TEMPLATE": template_database_name(_database["NAME"]),
}
if seam.str("TEST_DATABASE_NAME", default=""):
    # Lets several test runs share one server without sharing a test database.
    _database["TEST"]["NAME"] = seam.str("TEST_DATABASE_NAME")
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The owner (migration) role (tenancy/owner.py): DATABASE_OWNER_URL, else
# `<db user>_owner` on the same server without a password (trust or peer auth).
_owner_url = env.str("DATABASE_OWNER_URL", default="")
_owner = environ.Env.db_url_config(_owner_url) if _owner_url else {}
if _owner_url and (_owner.get("NAME") != _database["NAME"] or not _owner.get("USER")):
    raise ImproperlyConfigured(
        "DATABASE_OWNER_URL must name a user and the same database as DATABASE_URL."
    )
# The roles as `bootstrap_db` creates them; the NOLOGIN ones are entered with SET LOCAL ROLE.
_roles = RoleNames.for_login(_database["USER"], _owner.get("USER"))
NUDGE_DB_OWNER = {
    "USER": _roles.owner,
    "PASSWORD": _owner.get("PASSWORD") or "",
    "HOST": unquote(_owner.get("HOST") or "") or _database.get("HOST") or "",
    "PORT": str(_owner.get("PORT") or _database.get("PORT") or ""),
}
NUDGE_DB_LOGIN_ROLE = _roles.login
NUDGE_DB_OWNER_ROLE = _roles.owner
NUDGE_DB_SWEEPER_ROLE = _roles.sweeper
NUDGE_DB_SUPPORT_ROLE = _roles.support
NUDGE_DB_PLANNER_ROLE = _roles.planner

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not EMBEDDED_DATABASE:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. It has no default outside the embedded development database."
        )
    _key_file = STATE_DIR / "secret_key"
    if not _key_file.exists():
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        _key_file.write_text(secrets.token_urlsafe(50))
        _key_file.chmod(0o600)
    SECRET_KEY = _key_file.read_text().strip()

INSTALLED_APPS = [
    "nudgeproject.apps.NudgeAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    # The apps, ground floor first (docs/ARCHITECTURE.md, "Layers").
    "core",
    "tenancy",
    "pacing",
    "accounts",
    "calendars",
    "followups",
    "scheduled_sends",
    "messaging",
    "sweeps",
    "portal",
    "console",
    "axes",
    "csp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files from STATIC_ROOT, before the session and the database are touched.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "nudgeproject.urls"
WSGI_APPLICATION = "nudgeproject.wsgi.application"
ASGI_APPLICATION = "nudgeproject.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "csp.context_processors.nonce",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# What nudges and the user area are written in (each person's own: DeliverySettings.language).
LANGUAGES = [
    ("en", "English"),
    ("de", "Deutsch"),
    ("es", "Español"),
    ("fr", "Français"),
    ("pt-br", "Português (Brasil)"),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- The end-user area ----------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "portal:home"
globals().update(
    env.email_url(
        "EMAIL_URL",
        default="consolemail://" if DEBUG or EMBEDDED_DATABASE else "smtp://localhost:25",
    )
)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="nudge@localhost")
# --- Sign-in throttling (django-axes) and password-reset limits -------------
# The first backend refuses a locked-out sign-in before any password is hashed.
AUTHENTICATION_BACKENDS = [
    "portal.signin.ThrottledSignIn",
    "django.contrib.auth.backends.ModelBackend",
]
# Limits: NUDGE_SIGNIN_* (core/config.py); why these options: portal/signin.py.
AXES_FAILURE_LIMIT = "portal.signin.failure_limit"
AXES_COOLOFF_TIME = "portal.signin.lockout_duration"
# The pair, never either alone: a stranger's guesses cannot lock the owner out from
# elsewhere, and one address's guesses at many names lock out nobody else.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# A try while locked is refused unchecked and not recorded: it cannot lengthen the lock.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "portal.signin.client_address"
AXES_LOCKOUT_CALLABLE = "portal.signin.locked_out"
# A success from a shared address must not hand a guesser at the same account, from
# there, a fresh count; a completed password reset does lift it (portal/signin.py).
AXES_RESET_ON_SUCCESS = False
AXES_DISABLE_ACCESS_LOG = True  # successful sign-ins are not stored; failures are

STATIC_URL = "static/"
STATIC_ROOT = seam.path("STATIC_ROOT", default=str(STATE_DIR / "static"))
# Gzip copies served to clients that accept them; file names unchanged (no manifest).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Production hardening (on whenever DEBUG is off) -----------------------
SECURE_SSL_REDIRECT = not DEBUG
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_SECONDS = 0 if DEBUG else 31536000
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = False  # a one-way door: submit the site to the preload list knowingly
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https")
    if _flag("BEHIND_TLS_PROXY", env.str("BEHIND_TLS_PROXY", default="false"))
    else None
)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
CSRF_TRUSTED_ORIGINS = [f"{_public.scheme}://{_public.netloc}"] if PUBLIC_BASE_URL else []
# A refused form gets a page of the site, not Django's (whose inline <style> CSP blocks).
CSRF_FAILURE_VIEW = "nudgeproject.views.csrf_failure"
# Content-Security-Policy on every response: nothing from elsewhere, inline blocks only
# with the response's nonce, no eval; forms post here, or on to t.me (Link Telegram).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF, "https://t.me"],
    }
}

# --- The product's knobs (NUDGE_*, CALENDAR_*, ICS_*) -------------------------
# Defaults in core/config.py (KNOBS); push notifications arrive under the public origin.
globals().update(knob_settings(env, derived={"CALENDAR_PUSH_BASE_URL": PUBLIC_BASE_URL}))

# Which class sends each channel; JSON in the environment overrides entries.
NUDGE_CHANNEL_BACKENDS = {
    "console": "messaging.channels.console.ConsoleChannel",
    "telegram": "messaging.telegram.send.TelegramChannel",
    "whatsapp": "messaging.whatsapp.send.WhatsAppChannel",
}
NUDGE_CHANNEL_BACKENDS.update(json.loads(seam.str("NUDGE_CHANNEL_BACKENDS", default="{}")))

# --- Providers: delivery channels ------------------------------------------
TWILIO_ACCOUNT_SID = env.str("TWILIO_ACCOUNT_SID", default="")
TWILIO_AUTH_TOKEN = env.str("TWILIO_AUTH_TOKEN", default="")
TWILIO_WHATSAPP_FROM = env.str("TWILIO_WHATSAPP_FROM", default="")
TWILIO_API_BASE_URL = seam.str("TWILIO_API_BASE_URL", default="")
TWILIO_CONTENT_SID = env.str("TWILIO_CONTENT_SID", default="")
# Delivery receipts (empty without a public origin: none are asked for).
TWILIO_STATUS_CALLBACK_URL = f"{PUBLIC_BASE_URL}/twilio/status" if PUBLIC_BASE_URL else ""
TELEGRAM_BOT_TOKEN = env.str("TELEGRAM_BOT_TOKEN", default="")
TELEGRAM_API_BASE_URL = seam.str("TELEGRAM_API_BASE_URL", default="")
TELEGRAM_BOT_USERNAME = env.str("TELEGRAM_BOT_USERNAME", default="")
# Checked on X-Telegram-Bot-Api-Secret-Token; empty turns POST /telegram/webhook off.
TELEGRAM_WEBHOOK_SECRET = env.str("TELEGRAM_WEBHOOK_SECRET", default="")
TELEGRAM_WEBHOOK_URL = f"{PUBLIC_BASE_URL}/telegram/webhook" if PUBLIC_BASE_URL else ""
TWILIO_CONFIRM_CONTENT_SID = env.str("TWILIO_CONFIRM_CONTENT_SID", default="")
# The exact public URL Twilio posts inbound messages to (signatures cover it).
TWILIO_INBOUND_URL = f"{PUBLIC_BASE_URL}/twilio/inbound" if PUBLIC_BASE_URL else ""
CHANNEL_TIMEOUT_SECONDS = seam.float("CHANNEL_TIMEOUT_SECONDS", default=10.0)

CRON_SECRET = env.str("CRON_SECRET", default="")
# The cron secret is not accepted on GET /metrics.
METRICS_SECRET = env.str("METRICS_SECRET", default="")

# --- Providers: calendars ---------------------------------------------------
CALENDAR_TOKEN_KEYS = env.list("CALENDAR_TOKEN_KEYS", default=[])
GOOGLE_CLIENT_ID = env.str("GOOGLE_CLIENT_ID", default="")
GOOGLE_CLIENT_SECRET = env.str("GOOGLE_CLIENT_SECRET", default="")
GOOGLE_AUTH_URL = seam.str(
    "GOOGLE_AUTH_URL", default="https://accounts.google.com/o/oauth2/v2/auth"
)
GOOGLE_TOKEN_URL = seam.str("GOOGLE_TOKEN_URL", default="https://oauth2.googleapis.com/token")
GOOGLE_REVOKE_URL = seam.str("GOOGLE_REVOKE_URL", default="https://oauth2.googleapis.com/revoke")
GOOGLE_API_BASE_URL = seam.str(
    "GOOGLE_API_BASE_URL", default="https://www.googleapis.com/calendar/v3"
)
MICROSOFT_CLIENT_ID = env.str("MICROSOFT_CLIENT_ID", default="")
MICROSOFT_CLIENT_SECRET = env.str("MICROSOFT_CLIENT_SECRET", default="")
MICROSOFT_TENANT = env.str("MICROSOFT_TENANT", default="common")
MICROSOFT_LOGIN_BASE_URL = seam.str(
    "MICROSOFT_LOGIN_BASE_URL", default="https://login.microsoftonline.com"
)
MICROSOFT_GRAPH_BASE_URL = seam.str(
    "MICROSOFT_GRAPH_BASE_URL", default="https://graph.microsoft.com/v1.0"
)

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
if LOG_LEVEL not in logging.getLevelNamesMapping():
    raise ImproperlyConfigured(
        "LOG_LEVEL must be a logging level: DEBUG, INFO, WARNING, ERROR or CRITICAL"
    )
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "structured": {"()": "core.log_format.KeyValueFormatter"},
    },
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "structured"},
    },
    "loggers": {
        "nudge": {"handlers": ["stderr"], "level": LOG_LEVEL, "propagate": True},
        # Request URLs carry the bot token; python-telegram-bot logs message text at DEBUG.
        "httpx": {"level": "WARNING"},
        "telegram": {"level": "WARNING"},
        # urllib3 logs request paths at DEBUG, and an ICS feed's path is a secret.
        "urllib3": {"level": "WARNING"},
        "twilio.http_client": {"level": "WARNING"},
    },
}
