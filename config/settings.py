"""Jointline settings, all from environment variables.

With no variable set, Jointline runs on the embedded default: SQLite under
``JOINTLINE_DATA_DIR``, Celery tasks run eagerly in the web process, and a
local-memory cache. ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` switch to
the production stack: a real store, a Celery broker, a shared cache and rate
limits that hold across web processes. Every setting is listed in the README.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url

from config.env import env_bool, env_float, env_int, env_list, env_str
from config.security_headers import DEFAULT_CONTENT_SECURITY_POLICY, DEFAULT_PERMISSIONS_POLICY

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("JOINTLINE_DATA_DIR", str(BASE_DIR / "var")))


def _embedded_secret_key() -> str:
    """A per-installation key for the embedded default, created on first start."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _embedded_secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "orgs",
    "timeline",
    "store",
    "clock",
    "warroom",
    "analysis",
    "promql",
    "incidents",
    "ingest",
    "ops",
]

MIDDLEWARE = [
    "ops.middleware.ProbeMiddleware",
    "ops.middleware.ApiMetricsMiddleware",
    # gzip for JSON and text, not for pages with a CSRF token nor cross-site requests with the session
    # (BREACH: config/compression.py); above everything that writes the body, and above CSRF.
    "config.compression.ResponseGZipMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.security_headers.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'jointline.sqlite3'}")
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60))
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# A Redis that hangs instead of refusing (failover, a dropped connection) must not hold a push for long:
# cache and broker calls give up after this many seconds (rate limits fail open, the sweeper re-enqueues).
JOINTLINE_REDIS_TIMEOUT_S = env_float("JOINTLINE_REDIS_TIMEOUT_S", 2.0, minimum=0.1)
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_timeout": JOINTLINE_REDIS_TIMEOUT_S,
                "socket_connect_timeout": JOINTLINE_REDIS_TIMEOUT_S,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "timeline:page"
LOGOUT_REDIRECT_URL = "login"
# --- sign-in throttling ---
# Password sign-in is throttled (orgs/login_throttle.py): this many failures for one account, or from
# one client address, within the window lock sign-in there for the lockout; counted in the cache
# (Redis when configured). Behind a proxy that appends the client to X-Forwarded-For, trust its last
# entry as the client's address.
AUTHENTICATION_BACKENDS = ["orgs.login_throttle.ThrottledModelBackend"]
# The continuous detection (analysis.tasks): data one run covers at most per organisation,
# how long before now it stops (late data), and how old a backlog may be before it is skipped.
JOINTLINE_DETECTOR_MAX_SPAN_S = env_int("JOINTLINE_DETECTOR_MAX_SPAN_S", 6 * 3600, minimum=60)
JOINTLINE_DETECTOR_SETTLE_S = env_int("JOINTLINE_DETECTOR_SETTLE_S", 120, minimum=0)
JOINTLINE_DETECTOR_BACKLOG_S = env_int("JOINTLINE_DETECTOR_BACKLOG_S", 7 * 86400, minimum=3600)
JOINTLINE_LOGIN_MAX_FAILURES = env_int("JOINTLINE_LOGIN_MAX_FAILURES", 5, minimum=1)
JOINTLINE_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("JOINTLINE_LOGIN_MAX_FAILURES_PER_ADDRESS", 20, minimum=1)
JOINTLINE_LOGIN_WINDOW_S = env_int("JOINTLINE_LOGIN_WINDOW_S", 900, minimum=1)
JOINTLINE_LOGIN_LOCKOUT_S = env_int("JOINTLINE_LOGIN_LOCKOUT_S", 900, minimum=1)
JOINTLINE_TRUST_X_FORWARDED_FOR = env_bool("JOINTLINE_TRUST_X_FORWARDED_FOR", False)
# --- end sign-in throttling ---

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Plotly.js is a build of plotly.js with only the trace types the pages draw, vendored in
# warroom/static/vendor/plotly-jointline/ (no CDN; its recipe is docker/plotly-bundle/, run by hand, not
# by collectstatic): docs/decisions/0067-plotly-bundle-of-our-traces.md.
STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.AppDirectoriesFinder"]
# Hashed names and gzip copies, written by collectstatic (Docker image, quickstart): config/staticfiles.py.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.staticfiles.HashedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
# The pages load their scripts from their own origin: no static answer needs to be readable by others.
WHITENOISE_ALLOW_ALL_ORIGINS = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "orgs.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies are objects; forms stay accepted as before.
    "DEFAULT_PARSER_CLASSES": [
        "config.api_input.JSONObjectParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # One error shape for every API: {"error": ..., "errors": [{"field": ..., "reason": ...}]}.
    "EXCEPTION_HANDLER": "config.api_errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "config.api_schema.JointlineAutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Jointline API",
    "DESCRIPTION": "Push telemetry, read lanes and events, each through the caller's access scope.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

# Celery: without a broker, tasks run eagerly in the web process (embedded default).
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"  # a host: kombu warns without one
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("JOINTLINE_TASK_TIME_LIMIT_S", 600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
CELERY_TASK_DEFAULT_QUEUE = "jointline"
CELERY_TASK_ROUTES = {
    "ingest.tasks.apply_batch": {"queue": "ingest"},
    "ingest.tasks.sweep_journal": {"queue": "jointline"},
    "store.tasks.*": {"queue": "jointline"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A key prefix keeps several installations (or test runs) apart on one Redis.
REDIS_KEY_PREFIX = env_str("JOINTLINE_REDIS_KEY_PREFIX", "")
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_timeout": JOINTLINE_REDIS_TIMEOUT_S,
    "socket_connect_timeout": JOINTLINE_REDIS_TIMEOUT_S,
    **({"global_keyprefix": REDIS_KEY_PREFIX} if REDIS_KEY_PREFIX else {}),
}
CELERY_BROKER_CONNECTION_TIMEOUT = JOINTLINE_REDIS_TIMEOUT_S
# An enqueue to a Redis that is down is retried once: the journal entry is already durable, and the
# sweeper enqueues it again (ingest.services.batch_enqueue never raises).
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.1,
    "interval_max": 0.2,
}
CELERY_BEAT_SCHEDULE = {
    "sweep-journal": {"task": "ingest.tasks.sweep_journal", "schedule": 60.0},
    "create-partitions-ahead": {"task": "store.tasks.create_partitions_ahead", "schedule": 3600.0},
    "apply-retention": {"task": "ops.tasks.apply_retention", "schedule": 3600.0},
    "refresh-rollups": {"task": "store.tasks.refresh_rollups", "schedule": 60.0},
    "compact-samples": {"task": "store.tasks.compact_samples", "schedule": 3600.0},
    "detect-latest": {"task": "analysis.tasks.detect_latest", "schedule": 600.0},
    # each organisation's configured detector over new data, from its watermark, at most
    # JOINTLINE_DETECTOR_MAX_SPAN_S of data per run (analysis.tasks.detect_continuous)
    "detect-continuous": {"task": "analysis.tasks.detect_continuous", "schedule": 300.0},
}

# Ingest limits.
JOINTLINE_PUSH_MAX_BYTES = env_int("JOINTLINE_PUSH_MAX_BYTES", 16 * 2**20, minimum=1024)
JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES = env_int(
    "JOINTLINE_PUSH_MAX_DECOMPRESSED_BYTES", 128 * 2**20, minimum=1024
)
JOINTLINE_PUSH_MAX_POINTS = env_int("JOINTLINE_PUSH_MAX_POINTS", 2_000_000, minimum=1)
JOINTLINE_PUSH_REQUESTS_PER_MINUTE = env_int("JOINTLINE_PUSH_REQUESTS_PER_MINUTE", 1200, minimum=1)
JOINTLINE_PUSH_SAMPLES_PER_MINUTE = env_int("JOINTLINE_PUSH_SAMPLES_PER_MINUTE", 60_000_000, minimum=1)
# While Redis is unreachable the rate limits fail open for this long per web process (pushes are still
# journaled in PostgreSQL), then pushes get 503 with Retry-After until Redis answers (0: 503 at once).
JOINTLINE_RATE_LIMIT_FAIL_OPEN_S = env_float("JOINTLINE_RATE_LIMIT_FAIL_OPEN_S", 300.0, minimum=0)
JOINTLINE_FUTURE_TOLERANCE_S = env_float("JOINTLINE_FUTURE_TOLERANCE_S", 600.0, minimum=0)
JOINTLINE_SWEEP_AFTER_S = env_int("JOINTLINE_SWEEP_AFTER_S", 120, minimum=1)
JOINTLINE_APPLY_MAX_ATTEMPTS = env_int("JOINTLINE_APPLY_MAX_ATTEMPTS", 5, minimum=1)
JOINTLINE_PARTITION_DAYS_AHEAD = env_int("JOINTLINE_PARTITION_DAYS_AHEAD", 3, minimum=0)
JOINTLINE_LANE_MAX_WIDTH = env_int("JOINTLINE_LANE_MAX_WIDTH", 4000, minimum=10)
JOINTLINE_PROMQL_MAX_SERIES = env_int("JOINTLINE_PROMQL_MAX_SERIES", 10_000, minimum=1)  # per PromQL query
# --- read budgets (orgs/read_limits.py, promql/) ---
# A request's database statements run under this PostgreSQL statement_timeout (ms; 0: none), and none
# starts once the request has run this long (s; 0: no budget): a 503 saying so instead of a worker pinned
# until gunicorn kills it. The default stays under the web workers' timeout (JOINTLINE_WEB_TIMEOUT_S).
JOINTLINE_READ_STATEMENT_TIMEOUT_MS = env_int("JOINTLINE_READ_STATEMENT_TIMEOUT_MS", 30_000, minimum=0)
JOINTLINE_READ_BUDGET_S = env_float(
    "JOINTLINE_READ_BUDGET_S", max(env_int("JOINTLINE_WEB_TIMEOUT_S", 60, minimum=5) - 10, 5), minimum=0
)
# Reads (API and pages) per minute of one token or one signed-in person, counted in the shared cache;
# over it a 429 with Retry-After (0: no limit).
JOINTLINE_READ_REQUESTS_PER_MINUTE = env_int("JOINTLINE_READ_REQUESTS_PER_MINUTE", 1200, minimum=0)
# PromQL: samples one query may hold at once (Prometheus's query.max-samples), and the longest timeout a
# query may ask for in seconds (also its timeout when it asks none).
JOINTLINE_PROMQL_MAX_SAMPLES = env_int("JOINTLINE_PROMQL_MAX_SAMPLES", 20_000_000, minimum=1000)
JOINTLINE_PROMQL_MAX_TIMEOUT = env_float(
    "JOINTLINE_PROMQL_MAX_TIMEOUT", JOINTLINE_READ_BUDGET_S or 120.0, minimum=0.001
)
# --- end read budgets ---
# Seconds a live war-room lanes answer is served from the cache (warroom/lane_cache.py); 0: off.
JOINTLINE_LANE_CACHE_S = env_float("JOINTLINE_LANE_CACHE_S", 10.0, minimum=0)
# Store reads of one lanes request run on this many threads, each with its own new connection, where
# the engine allows concurrent reads (PostgreSQL); 1 (the default) reads them in turn on the request's
# connection, faster for the war room's reference view on two cores (decision 0066).
JOINTLINE_PARALLEL_READS = env_int("JOINTLINE_PARALLEL_READS", 1, minimum=1)
# Seconds the war room's clock-ordering check of a window is remembered per viewer, grants and clock
# corrections (warroom/view_cache.remembered); 0: computed on every lanes request.
JOINTLINE_ORDERING_CACHE_S = env_float("JOINTLINE_ORDERING_CACHE_S", 60.0, minimum=0)
# A JSON file replacing sections of the default-lane rules (timeline/lanes/rules.py); "": the shipped
# timeline/lanes/defaults.json.
JOINTLINE_DEFAULT_LANES_FILE = env_str("JOINTLINE_DEFAULT_LANES_FILE", "")
# A JSON file replacing sections of the clock rules: anchor events, restart events, reference
# organisations, signals that move together (clock/rules.py); "": clock/rules.json.
JOINTLINE_CLOCK_RULES_FILE = env_str("JOINTLINE_CLOCK_RULES_FILE", "")
# Where samples, events and rollups live: "" in the Django database's own store, "clickhouse" in ClickHouse at
# JOINTLINE_CLICKHOUSE_URL (http(s)://user:password@host:8123/database, or chdb:///path in-process).
JOINTLINE_STORE_BACKEND = env_str("JOINTLINE_STORE_BACKEND", "")
# "memory" (samples in one process's memory, store/memory.py) is for tests: only tests/settings.py allows it.
JOINTLINE_STORE_MEMORY_ALLOWED = False
JOINTLINE_CLICKHOUSE_URL = env_str("JOINTLINE_CLICKHOUSE_URL", f"chdb://{DATA_DIR / 'clickhouse'}")
# Lane reads over long windows read the 1 min / 5 min / 30 min / 1 h rollups (store/rollups.py); writes always
# maintain them. Off: every read scans raw samples (for comparisons).
JOINTLINE_ROLLUPS = env_bool("JOINTLINE_ROLLUPS", True)
# Megabytes of decoded samples (whole hours) each process keeps for PromQL's reads, every hour checked
# against the database before it is served (store/sample_cache.py); 0: off.
JOINTLINE_SAMPLE_CACHE_MB = env_int("JOINTLINE_SAMPLE_CACHE_MB", 256, minimum=0)
# Seconds from a write to the refresh of its rollups (one refresh for the applies in between; reads
# use raw samples for what waits). Under eager Celery (quickstart) the refresh runs at once.
JOINTLINE_ROLLUP_REFRESH_DELAY_S = env_float("JOINTLINE_ROLLUP_REFRESH_DELAY_S", 5.0, minimum=0)
# A worker whose apply leaves no journal entry waiting refreshes at once instead of after the delay:
# there is nothing to coalesce with, and the rollups are fresh seconds sooner (decision 0054).
JOINTLINE_ROLLUP_REFRESH_WHEN_IDLE = env_bool("JOINTLINE_ROLLUP_REFRESH_WHEN_IDLE", True)
# PostgreSQL: a write of 1,000 samples or more, with several minutes of each series, merges its rollups
# from the batch in the write instead of queueing them (decision 0033). Off: under a backlog of large
# batches the queued refresh kept ingest faster (2M samples: 0.48 of raw COPY to applied, against 0.34).
JOINTLINE_ROLLUPS_FROM_BATCH = env_bool("JOINTLINE_ROLLUPS_FROM_BATCH", False)
# How long rollup rows are kept (days; 0: forever, like raw samples by default), apart from the raw
# samples' retention: e.g. raw 14 days, minute rows 35, hour rows 400. Older windows read what is left.
JOINTLINE_ROLLUP_1M_DAYS = env_int("JOINTLINE_ROLLUP_1M_DAYS", 0, minimum=0)
JOINTLINE_ROLLUP_1H_DAYS = env_int("JOINTLINE_ROLLUP_1H_DAYS", 0, minimum=0)
JOINTLINE_SIGNAL_MAP_FILE = env_str("JOINTLINE_SIGNAL_MAP_FILE", "")
# A JSON file overriding the analyses' event, attribute and metric names and detector settings
# (sections recovery, checkpoint, detection; README "Report analyses").
JOINTLINE_ANALYSES_FILE = env_str("JOINTLINE_ANALYSES_FILE", "")
# False detections a day one series judged against its own history may give (the analyses file's
# detection.fp_per_day overrides it); see docs/decisions/0024.
JOINTLINE_DETECTOR_FP_PER_DAY = env_float("JOINTLINE_DETECTOR_FP_PER_DAY", 0.2, minimum=0.001)
# A deployment's topology rules replacing sections of analysis/topology_rules.json.
JOINTLINE_TOPOLOGY_RULES_FILE = env_str("JOINTLINE_TOPOLOGY_RULES_FILE", "")
# A deployment's metric kinds (which way is worse for a health metric) replacing sections of
# analysis/metric_kinds.json.
JOINTLINE_METRIC_KINDS_FILE = env_str("JOINTLINE_METRIC_KINDS_FILE", "")
JOINTLINE_IMPORT_MAX_BYTES = env_int("JOINTLINE_IMPORT_MAX_BYTES", 64 * 2**20, minimum=1024)
# How many distinct UTC days one push may span, and how far into the past it may reach (the push
# APIs refuse more; imports and the scenario loader are not bound by them).
JOINTLINE_PUSH_MAX_DAYS = env_int("JOINTLINE_PUSH_MAX_DAYS", 31, minimum=1)
JOINTLINE_PUSH_MAX_AGE_DAYS = env_int("JOINTLINE_PUSH_MAX_AGE_DAYS", 400, minimum=1)
# Day partitions one apply transaction may write (each holds a few locks until commit): a journal
# entry spanning more days is applied in several transactions, resuming where a crash left it.
JOINTLINE_APPLY_DAYS_PER_TRANSACTION = env_int("JOINTLINE_APPLY_DAYS_PER_TRANSACTION", 31, minimum=1)
# A worker applies further small accepted entries with the one it was given, in one transaction,
# up to this many entries and samples + events.
JOINTLINE_APPLY_GROUP_MAX_ENTRIES = env_int("JOINTLINE_APPLY_GROUP_MAX_ENTRIES", 200, minimum=1)
JOINTLINE_APPLY_GROUP_MAX_SAMPLES = env_int("JOINTLINE_APPLY_GROUP_MAX_SAMPLES", 50_000, minimum=1)
# Creating a day partition waits at most this long for its lock, and tries this many more times.
JOINTLINE_PARTITION_LOCK_TIMEOUT_MS = env_int("JOINTLINE_PARTITION_LOCK_TIMEOUT_MS", 1000, minimum=10)
JOINTLINE_PARTITION_LOCK_RETRIES = env_int("JOINTLINE_PARTITION_LOCK_RETRIES", 5, minimum=0)
# Celery closes a worker's database connections after every task unless told to reuse them; a new
# PostgreSQL connection costs more than applying a small entry. Reused for this many tasks (the
# apply task drops a broken or CONN_MAX_AGE-old one first); 0 closes them after every task.
CELERY_DB_REUSE_MAX = env_int("JOINTLINE_WORKER_DB_REUSE_TASKS", 1000, minimum=0) or None

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("JOINTLINE_LOG_LEVEL", "INFO")},
    "loggers": {"django.server": {"level": "WARNING"}, "celery.app.trace": {"level": "WARNING"}},
}

# --- serving and security (production) ---
# Off on the embedded default (plain http://127.0.0.1 under runserver). JOINTLINE_HTTPS=true turns on
# what `manage.py check --deploy` asks of a site served over HTTPS; each part can be set on its own.
JOINTLINE_HTTPS = env_bool("JOINTLINE_HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("JOINTLINE_SSL_REDIRECT", JOINTLINE_HTTPS)
# Probes and scrapes come over plain HTTP from inside the network (ops.middleware.ProbeMiddleware
# answers them first anyway; this covers a MIDDLEWARE without it).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SESSION_COOKIE_SECURE = env_bool("JOINTLINE_SECURE_COOKIES", JOINTLINE_HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_HSTS_SECONDS = env_int("JOINTLINE_HSTS_SECONDS", 31_536_000 if JOINTLINE_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("JOINTLINE_HSTS_INCLUDE_SUBDOMAINS", JOINTLINE_HTTPS)
SECURE_HSTS_PRELOAD = env_bool("JOINTLINE_HSTS_PRELOAD", JOINTLINE_HTTPS)
if env_bool("JOINTLINE_TRUST_X_FORWARDED_PROTO", False):
    # Only behind a proxy that sets X-Forwarded-Proto itself and never passes on a client's own.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


def _header_policy(name: str, default: str) -> str:
    """A policy header's value from the environment; ``off`` sends no header (a proxy sets its own)."""
    value = env_str(name, default)
    return "" if value.lower() == "off" else value


# Headers of every answer, HTTP or HTTPS (config/security_headers.py says what the pages need).
JOINTLINE_CONTENT_SECURITY_POLICY = _header_policy(
    "JOINTLINE_CONTENT_SECURITY_POLICY", DEFAULT_CONTENT_SECURITY_POLICY
)
JOINTLINE_CSP_REPORT_ONLY = env_bool("JOINTLINE_CSP_REPORT_ONLY", False)
JOINTLINE_PERMISSIONS_POLICY = _header_policy("JOINTLINE_PERMISSIONS_POLICY", DEFAULT_PERMISSIONS_POLICY)
SECURE_REFERRER_POLICY = env_str("JOINTLINE_REFERRER_POLICY", "same-origin")
# A document-only header: config/security_headers.py sends it on pages (Django would on every answer).
JOINTLINE_CROSS_ORIGIN_OPENER_POLICY = env_str("JOINTLINE_CROSS_ORIGIN_OPENER_POLICY", "same-origin")
SECURE_CROSS_ORIGIN_OPENER_POLICY = None

# Operations (ops/): probes, metrics, retention.
JOINTLINE_READY_MAX_BACKLOG = env_int("JOINTLINE_READY_MAX_BACKLOG", 10_000, minimum=0)
JOINTLINE_READY_REQUIRE_WORKER = env_bool("JOINTLINE_READY_REQUIRE_WORKER", True)
JOINTLINE_READY_WORKER_MAX_AGE_S = env_float("JOINTLINE_READY_WORKER_MAX_AGE_S", 60.0, minimum=1)
JOINTLINE_WORKER_HEARTBEAT_S = env_float("JOINTLINE_WORKER_HEARTBEAT_S", 15.0, minimum=0.1)
JOINTLINE_WORKER_HEARTBEAT_FILE = env_str("JOINTLINE_WORKER_HEARTBEAT_FILE")
JOINTLINE_OPS_REDIS_TIMEOUT_S = env_float("JOINTLINE_OPS_REDIS_TIMEOUT_S", 1.0, minimum=0.05)
JOINTLINE_METRICS_TOKEN = env_str("JOINTLINE_METRICS_TOKEN")
# prometheus-client's own variable: the folder where every gunicorn worker writes its request metrics,
# summed at scrape time (config/gunicorn.py sets it); "": this process's metrics alone.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
JOINTLINE_RETENTION_SAMPLES_DAYS = env_int("JOINTLINE_RETENTION_SAMPLES_DAYS", 0, minimum=0)
JOINTLINE_RETENTION_EVENTS_DAYS = env_int("JOINTLINE_RETENTION_EVENTS_DAYS", 0, minimum=0)
JOINTLINE_RETENTION_JOURNAL_DAYS = env_int("JOINTLINE_RETENTION_JOURNAL_DAYS", 14, minimum=0)
JOINTLINE_RETENTION_LOCK_TIMEOUT_S = env_int("JOINTLINE_RETENTION_LOCK_TIMEOUT_S", 5, minimum=1)
# Where beat keeps its schedule: somewhere writable (the container's root filesystem is read-only).
CELERY_BEAT_SCHEDULE_FILENAME = env_str("JOINTLINE_BEAT_SCHEDULE_FILE", "celerybeat-schedule")
# --- end serving and security ---
# --- ingest limits that protect every organisation (docs/decisions/0022) ---
# Series an organisation may hold, and new series one push may create: a push over either is refused
# whole (400 naming `series`); at apply time series beyond the organisation's limit are dropped and
# counted in the batch status.
JOINTLINE_MAX_SERIES_PER_ORG = env_int("JOINTLINE_MAX_SERIES_PER_ORG", 100_000, minimum=1)
JOINTLINE_MAX_NEW_SERIES_PER_PUSH = env_int("JOINTLINE_MAX_NEW_SERIES_PER_PUSH", 20_000, minimum=1)
# A file import takes timestamps at most this many days old, 30 years: the public log archives of 2003-2006
# stay importable, year 1 and epoch-zero mistakes do not (pushes: JOINTLINE_PUSH_MAX_AGE_DAYS); and at
# most JOINTLINE_FUTURE_TOLERANCE_S ahead, like every push.
JOINTLINE_IMPORT_MAX_AGE_DAYS = env_int("JOINTLINE_IMPORT_MAX_AGE_DAYS", 10_958, minimum=1)
# On PostgreSQL, days older than this when first written get month partitions instead of day partitions.
JOINTLINE_DAY_PARTITIONS_DAYS = env_int("JOINTLINE_DAY_PARTITIONS_DAYS", 400, minimum=1)
# PostgreSQL: beat compacts each sample partition whose days all ended this many days ago (at least 1)
# into per-series blocks (store/sample_blocks.py, docs/decisions/0043-sample-blocks-in-the-store.md);
# `manage.py compact_samples` runs it by hand whatever JOINTLINE_SAMPLE_COMPACTION says.
JOINTLINE_SAMPLE_COMPACTION = env_bool("JOINTLINE_SAMPLE_COMPACTION", True)
JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS = env_int("JOINTLINE_SAMPLE_COMPACT_AFTER_DAYS", 2, minimum=1)
# A compressed push body may inflate to at most this many times its size (never limited below 1 MiB).
JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO = env_float(
    "JOINTLINE_PUSH_MAX_DECOMPRESSION_RATIO", 100.0, minimum=1.0
)
# Pushes of one organisation read, decompressed and parsed at once across every web process (Redis);
# one more answers 429 with Retry-After. A slot is freed after this many seconds if its process died.
JOINTLINE_PUSH_CONCURRENCY_PER_ORG = env_int("JOINTLINE_PUSH_CONCURRENCY_PER_ORG", 4, minimum=1)
JOINTLINE_PUSH_SLOT_EXPIRY_S = env_int("JOINTLINE_PUSH_SLOT_EXPIRY_S", 120, minimum=1)
# --- end ingest limits ---
