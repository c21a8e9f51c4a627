"""Django settings, read from the environment (see `.env.example`).

The embedded default needs no service: SQLite under `var/`, Celery tasks run eagerly,
media on the local disk. Setting `DATABASE_URL` and `CELERY_BROKER_URL` selects
PostgreSQL and a Redis broker with real workers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MITL_VAR_DIR", BASE_DIR / "var"))


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def _env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def _env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = os.environ.get(name) or str(default)
    if not value.isdigit() or int(value) < minimum:
        raise ImproperlyConfigured(
            f"{name} must be a whole number of at least {minimum}, got {value!r}"
        )
    return int(value)


def _env_pauses(name: str) -> dict[str, float]:
    """Read "point=seconds,point=seconds" (annotation/faults.py); empty when unset."""
    pauses: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in os.environ.get(name, "").split(","))):
        point, _, seconds = (part.strip() for part in entry.partition("="))
        if not point or not re.fullmatch(r"[0-9]+(\.[0-9]+)?", seconds):
            raise ImproperlyConfigured(f"{name}: {entry!r} is not point=seconds (e.g. submit=1.5)")
        pauses[point] = float(seconds)
    return pauses


_RATE = re.compile(r"^[0-9]+/(s|sec|second|m|min|minute|h|hour|d|day)$")


def _env_rate(name: str, default: str) -> str | None:
    """Read a DRF throttle rate ("5/min"); "off" disables the limit."""
    value = (os.environ.get(name) or default).strip()
    if value.lower() == "off":
        return None
    if not _RATE.match(value):
        raise ImproperlyConfigured(
            f"{name} must be a rate like 5/min (per second, minute, hour or day) or off, "
            f"got {value!r}"
        )
    return value


DEBUG = _env_bool("DEBUG", True)
DEVELOPMENT_SECRET_KEY = "insecure-development-key-do-not-use-in-production"
# Keys that anyone can read in this repository (.env.example's placeholder, the key above).
PUBLIC_SECRET_KEYS = frozenset({"change-me-to-a-long-random-string", DEVELOPMENT_SECRET_KEY})
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = DEVELOPMENT_SECRET_KEY
elif not DEBUG and SECRET_KEY.strip() in PUBLIC_SECRET_KEYS:
    raise ImproperlyConfigured(
        "SECRET_KEY is the placeholder from .env.example (or the development key), which "
        "anyone can read: with DEBUG off set a long random key of your own, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", "")

# HTTPS (docs/architecture.md, "Run modes"). Off by default: the embedded default and the
# local docker-compose stack are plain http://127.0.0.1. HTTPS_ONLY=1 says browsers reach the
# site only over HTTPS: cookies go only over HTTPS, plain HTTP is redirected, and HSTS tells
# browsers to come back over HTTPS only (a year by default; SECURE_HSTS_SECONDS=0 turns it
# off). Including subdomains and asking for the browsers' preload list are separate choices,
# as both are hard to undo.
HTTPS_ONLY = _env_bool("HTTPS_ONLY", False)
SESSION_COOKIE_SECURE = HTTPS_ONLY
CSRF_COOKIE_SECURE = HTTPS_ONLY
SECURE_SSL_REDIRECT = _env_bool("SECURE_SSL_REDIRECT", HTTPS_ONLY)
SECURE_HSTS_SECONDS = _env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if HTTPS_ONLY else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env_bool("SECURE_HSTS_PRELOAD", False)
# A proxy that terminates TLS talks plain HTTP to gunicorn: trust its X-Forwarded-Proto only
# when told it sets (overwrites) that header on every request, as a client can send it too.
# Without it, HTTPS_ONLY's redirect would loop behind such a proxy.
BEHIND_TLS_PROXY = _env_bool("BEHIND_TLS_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_TLS_PROXY else None

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc files served locally, no CDN
    "annotation",
    "pipeline",
    "api",
    "frontend",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files under gunicorn, no CDN
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        # A kept connection is checked before reuse, so the first request after a database
        # restart reconnects instead of failing.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # The demo writes tens of thousands of rows; WAL and a busy timeout keep SQLite steady.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
# WhiteNoise also serves straight from the apps' static folders, so gunicorn without a
# `collectstatic` (a local run, the benchmarks) still has its CSS and JS.
WHITENOISE_USE_FINDERS = True
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))

# Media (image files): the local disk under MEDIA_ROOT, or an S3-compatible bucket when
# STORAGE_BUCKET is set (AWS S3, or MinIO through STORAGE_ENDPOINT_URL). Credentials come
# only from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), read by boto3.
STORAGE_BUCKET = os.environ.get("STORAGE_BUCKET", "")
STORAGE_ENDPOINT_URL = os.environ.get("STORAGE_ENDPOINT_URL") or None
STORAGE_REGION = os.environ.get("STORAGE_REGION") or None
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
if STORAGE_BUCKET:
    STORAGES["default"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": STORAGE_BUCKET,
            "endpoint_url": STORAGE_ENDPOINT_URL,
            "region_name": STORAGE_REGION,
            # A taken name gets a new one: one import never overwrites (or, cleaning up
            # after a failure, deletes) another's files.
            "file_overwrite": False,
            "querystring_auth": True,  # private objects, signed URLs
            # S3-compatible servers rarely have per-bucket DNS names.
            "addressing_style": "path" if STORAGE_ENDPOINT_URL else None,
        },
    }

# Where releases are written: RELEASES_DIR/<name>/<version>/.
RELEASES_DIR = Path(os.environ.get("RELEASES_DIR", VAR_DIR / "releases"))
# Graded relevance matrices (per proxy, version, corpus and queries) for `evaluate --relevance`.
RELEVANCE_CACHE_DIR = Path(os.environ.get("RELEVANCE_CACHE_DIR", VAR_DIR / "relevance"))
# Pages built once per state of a batch's work (the bias report: pipeline/bias_page.py).
REPORTS_CACHE_DIR = Path(os.environ.get("REPORTS_CACHE_DIR", VAR_DIR / "reports-cache"))

# Celery: no broker means the embedded default, where tasks run eagerly in-process.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND") or None
CELERY_TASK_ACKS_LATE = True
# With late acks, Redis redelivers a task not acknowledged within the visibility timeout
# (1 h by default): it must outlast the longest task (imports, up to 6 h) or a running
# task starts a second time. Recovering from a lost worker does not wait for it: the task
# leases below do (docs/architecture.md, "Lost workers").
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 7 * 3600}
# A running stage or import heart-beats every TASK_HEARTBEAT_S; the watchdog
# (annotation.recover_tasks, every TASK_RECOVER_EVERY_S) sends it again once its
# heartbeat is TASK_STALE_S old, or once it has waited TASK_QUEUED_STALE_S for a worker
# (a message lost with the broker's memory), and gives up after TASK_MAX_RESENDS tries.
TASK_HEARTBEAT_S = _env_int("TASK_HEARTBEAT_S", 10, minimum=1)
TASK_STALE_S = _env_int("TASK_STALE_S", 60, minimum=2)
TASK_QUEUED_STALE_S = _env_int("TASK_QUEUED_STALE_S", 900, minimum=2)
TASK_MAX_RESENDS = _env_int("TASK_MAX_RESENDS", 3, minimum=0)
TASK_RECOVER_EVERY_S = float(_env_int("TASK_RECOVER_EVERY_S", 30, minimum=1))
if TASK_STALE_S <= 2 * TASK_HEARTBEAT_S:
    raise ImproperlyConfigured(
        f"TASK_STALE_S ({TASK_STALE_S}) must exceed two heartbeats "
        f"(TASK_HEARTBEAT_S = {TASK_HEARTBEAT_S}), or live tasks would be sent again"
    )
# Test-only pauses at named points (annotation/faults.py): "submit=1.5,stage:pooling=20".
FAULT_PAUSES = _env_pauses("MITL_FAULT_PAUSES")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Run by `celery -A config beat` (docker-compose's `beat` service); "next HIT" also expires
# overdue work on the spot, so the schedule only keeps the counts honest between requests.
CELERY_BEAT_SCHEDULE = {
    "expire-assignments": {"task": "annotation.expire_assignments", "schedule": 60.0},
    # Approve/reject on MTurk what the platform decided, for every batch with published HITs.
    "mturk-sync": {"task": "annotation.mturk_sync", "schedule": 300.0},
    # Close the rounds whose work is all approved (the pages ask after each submit or review;
    # this catches work that arrives without a page: MTurk's sync, a results import).
    "close-complete-rounds": {"task": "mitl.close_complete_rounds", "schedule": 60.0},
    # Remove import uploads left behind by a web process killed mid-request.
    "clean-import-staging": {"task": "annotation.clean_import_staging", "schedule": 3600.0},
    # Send again the stages and imports whose worker was lost (annotation/task_leases.py).
    "recover-tasks": {"task": "annotation.recover_tasks", "schedule": TASK_RECOVER_EVERY_S},
}
# An import's staged uploads older than this, that no queued or running job needs, are
# deleted by the hourly task above and `manage.py import_staging_clean`.
IMPORT_STAGING_MAX_AGE_HOURS = _env_int("IMPORT_STAGING_MAX_AGE_HOURS", 24, minimum=1)

# Amazon Mechanical Turk (docs/mturk.md). The public HTTPS address of this platform, used in
# each HIT's ExternalQuestion; AWS credentials come from boto3's own chain, never from here.
MTURK_EXTERNAL_BASE_URL = os.environ.get("MTURK_EXTERNAL_BASE_URL", "")
# Extra `turkSubmitTo` origins (a local stand-in for MTurk), honoured only with DEBUG on.
MTURK_ALLOWED_SUBMIT_HOSTS = _env_list("MTURK_ALLOWED_SUBMIT_HOSTS", "") if DEBUG else []
# An MTurk API address replacing the sandbox's and production's: the soak's stand-in only.
MTURK_ENDPOINT_URL = os.environ.get("MTURK_ENDPOINT_URL", "")

LOGIN_URL = "login"
# Django's model backend, loading the account's worker with the account (one query less
# on every annotator request).
AUTHENTICATION_BACKENDS = ["annotation.auth.WorkerAwareBackend"]
LOGIN_REDIRECT_URL = "frontend:work"
LOGOUT_REDIRECT_URL = "login"

# The cache holds the login attempt counts (annotation/login_limits.py). Local memory counts per
# process: with several web processes (gunicorn's workers) set CACHE_URL to Redis.
CACHE_URL = os.environ.get("CACHE_URL", "")
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        f"CACHE_URL must be a Redis URL (redis://host:6379/1), got {CACHE_URL!r}"
    )
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": "mitl",
        }
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# Sessions live in the database; with a shared cache (Redis) they are read from it first,
# one query less on every request, and from the database alone while the cache is down
# (annotation/sessions.py). Not with the per-process default: a logout in one web process
# would leave the session alive in the others' memory.
SESSION_ENGINE = "annotation.sessions" if CACHE_URL else "django.contrib.sessions.backends.db"

# The limits on a rankings file, one set for every way in (the leaderboard page, the API, the
# `evaluate` and `explain` commands; mitl/ranking_limits.py): they keep the scoring task to
# seconds. Larger rankings are scored offline with `manage.py evaluate --no-limits`.
EVALUATION_MAX_BODY_BYTES = _env_int("EVALUATION_MAX_BODY_MB", 20, minimum=1) * 2**20
EVALUATION_MAX_RANKING_LENGTH = _env_int("EVALUATION_MAX_RANKING_LENGTH", 1000, minimum=10)

# The REST API (docs/api.md). Token first: an anonymous request then gets a 401 that names
# the scheme (`WWW-Authenticate: Token`) rather than a bare 403.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "api.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["api.filters.StrictFilterBackend"],  # malformed values: 400
    "DEFAULT_SCHEMA_CLASS": "api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    # JSON and form bodies capped at DATA_UPLOAD_MAX_MEMORY_SIZE (api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "api.parsers.JSONParser",
        "api.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # Password logins (the token endpoint and /accounts/login/): per address, per username
    # from one address, and per username from every address (annotation/login_limits.py).
    "DEFAULT_THROTTLE_RATES": {
        "login-ip": _env_rate("LOGIN_RATE_PER_IP", "10/min"),
        "login-username": _env_rate("LOGIN_RATE_PER_USERNAME", "5/min"),
        "login-account": _env_rate("LOGIN_RATE_PER_ACCOUNT", "20/min"),
        # New MTurk assignments opened on the public HIT page per client address
        # (annotation/mturk/page_limits.py): a worker opens one per HIT it accepts.
        "mturk-new-assignment": _env_rate("MTURK_NEW_ASSIGNMENT_RATE_PER_IP", "60/hour"),
    },
    # The client address is REMOTE_ADDR, unless the server sits behind this many proxies
    # that append to X-Forwarded-For (a client can write that header itself).
    "NUM_PROXIES": _env_int("NUM_PROXIES", 0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MITL curation API",
    "DESCRIPTION": "Datasets, batches, crowd work, reviews, releases and evaluations. "
    'Every error is {"detail": message, "errors": {field: [messages]}} (errors only '
    "for invalid input). See docs/api.md.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,  # request bodies without the read-only fields
    "ENUM_NAME_OVERRIDES": {
        "AssignmentStatusEnum": "annotation.models.AssignmentStatus",
        "BatchStateEnum": "annotation.models.BatchState",
        "ImportStatusEnum": "annotation.models.ImportStatus",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
