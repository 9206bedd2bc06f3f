"""TunePlane settings: one module, configured only by environment variables.

The embedded default (no variables set) is SQLite, filesystem object storage, an
in-memory channel layer, a filesystem Celery transport and the local executor. Every
production part is chosen by a `TUNEPLANE_*` or `DATABASE_URL` variable; a malformed
value raises ImproperlyConfigured at start-up rather than surprising a job later.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """A string variable; `NAME_FILE` (a path) wins, for secrets mounted as files."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc}")
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum {minimum}")
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [v.strip() for v in env_str(name, default).replace(";", ",").split(",") if v.strip()]


DEBUG = env_bool("TUNEPLANE_DEBUG", False)
DATA_DIR = Path(env_str("TUNEPLANE_DATA_DIR", str(BASE_DIR / "var"))).resolve()
SECRET_KEY = env_str("TUNEPLANE_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and env_bool("TUNEPLANE_REQUIRE_SECRET_KEY", False):
        raise ImproperlyConfigured("TUNEPLANE_SECRET_KEY (or TUNEPLANE_SECRET_KEY_FILE) is required")
    SECRET_KEY = "tuneplane-insecure-embedded-default-key-do-not-use-in-production"

ALLOWED_HOSTS = env_list("TUNEPLANE_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("TUNEPLANE_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "apps.accounts",
    "apps.governance",
    "apps.recipes",
    "apps.jobs",
    "apps.telemetry",
    "apps.environments",
    "apps.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "apps.accounts.middleware.IngestTokenGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tuneplane_site.urls"
ASGI_APPLICATION = "tuneplane_site.asgi.application"
WSGI_APPLICATION = "tuneplane_site.wsgi.application"

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
            ]
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'tuneplane.sqlite3'}"),
        # Under daphne every request runs in a fresh thread, so persistent per-thread
        # connections pile up until PostgreSQL refuses clients (seen in the ingest
        # benchmark). Keep 0 there and use the pool below instead.
        conn_max_age=env_int("TUNEPLANE_DB_CONN_MAX_AGE", 0),
    )
}
_pool_size = env_int("TUNEPLANE_DB_POOL_SIZE", 0)
if _pool_size and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    if DATABASES["default"]["CONN_MAX_AGE"]:
        raise ImproperlyConfigured("TUNEPLANE_DB_POOL_SIZE and TUNEPLANE_DB_CONN_MAX_AGE exclude each other")
    # psycopg's pool (Django 5.1+): connections, and the ingest staging tables they
    # hold, are reused across requests and threads.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": _pool_size,
        "timeout": env_int("TUNEPLANE_DB_POOL_TIMEOUT", 10, minimum=1),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker) share the file in the embedded default.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = DATA_DIR / "static"
# WhiteNoise serves from the finders in the embedded default; it warns if the root is absent.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True

LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:job-list"
LOGOUT_REDIRECT_URL = "console:login"

# Object storage: S3-compatible when a bucket is named, else the local filesystem.
S3_BUCKET = env_str("TUNEPLANE_S3_BUCKET")
if S3_BUCKET:
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": S3_BUCKET,
            "endpoint_url": env_str("TUNEPLANE_S3_ENDPOINT_URL") or None,
            "access_key": env_str("TUNEPLANE_S3_ACCESS_KEY_ID") or None,
            "secret_key": env_str("TUNEPLANE_S3_SECRET_ACCESS_KEY") or None,
            "region_name": env_str("TUNEPLANE_S3_REGION", "us-east-1"),
            "addressing_style": env_str("TUNEPLANE_S3_ADDRESSING_STYLE", "path"),
            "file_overwrite": False,
            "default_acl": None,
        },
    }
else:
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "objects")},
    }
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# Channels: Redis in production (several daphne processes), in-memory embedded.
_channel_redis = env_str("TUNEPLANE_CHANNEL_LAYER_URL")
CHANNEL_LAYERS = {
    "default": (
        {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [_channel_redis]}}
        if _channel_redis
        else {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    )
}

# Celery: a filesystem transport needs no broker process in the embedded default;
# production names Redis or RabbitMQ.
CELERY_BROKER_URL = env_str("TUNEPLANE_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = DATA_DIR / "broker"
    _broker_dir.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir),
        "data_folder_out": str(_broker_dir),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "jobs.sweep-local-attempts": {"task": "jobs.sweep_local_attempts", "schedule": 30.0},
    "jobs.sync-kubernetes-attempts": {"task": "jobs.sync_kubernetes_attempts", "schedule": 15.0},
    "jobs.gpu-watchdog": {"task": "jobs.gpu_watchdog", "schedule": 30.0},
    "environments.probe-runners": {"task": "environments.probe_runners", "schedule": 30.0},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.accounts.auth.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.accounts.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "TunePlane API",
    "DESCRIPTION": "Control plane for LLM fine-tuning and RL training jobs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "apps.jobs.choices.JobState",
        "AttemptStateEnum": "apps.jobs.choices.AttemptState",
    },
}

DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024  # ingest batches; packages are files
FILE_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

# TunePlane
TUNEPLANE_INGEST_URL = env_str("TUNEPLANE_INGEST_URL", "http://127.0.0.1:8000").rstrip("/")
TUNEPLANE_PUBLIC_URL = env_str("TUNEPLANE_PUBLIC_URL", TUNEPLANE_INGEST_URL).rstrip("/")
TUNEPLANE_INGEST_TOKEN_DAYS = env_int("TUNEPLANE_INGEST_TOKEN_DAYS", 14, minimum=1)
TUNEPLANE_ALLOWED_IMAGE_REGISTRIES = env_str("TUNEPLANE_ALLOWED_IMAGE_REGISTRIES")
TUNEPLANE_EXECUTOR = env_str("TUNEPLANE_EXECUTOR", "local")
if TUNEPLANE_EXECUTOR not in {"local", "kubernetes"}:
    raise ImproperlyConfigured(
        f"TUNEPLANE_EXECUTOR={TUNEPLANE_EXECUTOR!r}: choose 'local' or 'kubernetes'"
    )
TUNEPLANE_LOCAL_ROOT = Path(env_str("TUNEPLANE_LOCAL_ROOT", str(DATA_DIR / "local"))).resolve()
TUNEPLANE_SSE_KEEPALIVE_SECONDS = env_int("TUNEPLANE_SSE_KEEPALIVE_SECONDS", 15, minimum=1)
TUNEPLANE_SSE_POLL_SECONDS = float(env_str("TUNEPLANE_SSE_POLL_SECONDS", "0.5"))
TUNEPLANE_RUNNER_LOST_SECONDS = env_int("TUNEPLANE_RUNNER_LOST_SECONDS", 120, minimum=5)
# Kubernetes executor: the image whose /opt/tuneplane/capsule holds the SDK and runner
# (deploy/runtime/Dockerfile); a fleet's runtime_image setting overrides it.
TUNEPLANE_RUNTIME_IMAGE = env_str("TUNEPLANE_RUNTIME_IMAGE", "ghcr.io/tuneplane/runtime:0.1.0")
# GPU watchdog: a job seen on more GPUs than allocated is warned, and stopped if it is
# still over after this many seconds.
TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS = env_int("TUNEPLANE_GPU_WATCHDOG_GRACE_SECONDS", 300, minimum=0)
# A remote environment's runner counts as answering for this long after a healthy probe.
TUNEPLANE_ENV_RUNNER_STALE_SECONDS = env_int("TUNEPLANE_ENV_RUNNER_STALE_SECONDS", 90, minimum=5)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("TUNEPLANE_LOG_LEVEL", "INFO")},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("TUNEPLANE_SECURE_COOKIES", False)
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Production behind a TLS-terminating proxy (deploy/nginx/tuneplane.conf); what
# `manage.py check --deploy` asks for, each off in the embedded default.
if env_bool("TUNEPLANE_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("TUNEPLANE_SSL_REDIRECT", False)
# Job pods reach ingest inside the cluster over plain HTTP (TUNEPLANE_INGEST_URL); a
# redirect to the public https URL would break every runner.
SECURE_REDIRECT_EXEMPT = [r"^api/ingest/"]
SECURE_HSTS_SECONDS = env_int("TUNEPLANE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TUNEPLANE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("TUNEPLANE_HSTS_PRELOAD", False)
