"""Test settings: the production stack (PostgreSQL + Redis) when reachable.

Under ``CI=true`` an unreachable PostgreSQL or Redis stops the run with an
error instead of falling back, so CI never passes by skipping.
Outside CI, a missing service falls back to SQLite / local memory and the tests
marked ``services`` are skipped, so a laptop without services still runs the rest.
"""

import os

import psycopg
import redis

CI = os.environ.get("CI", "").lower() == "true"
TEST_DATABASE_URL = os.environ.get(
    "JOINTLINE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jointline"
)
TEST_REDIS_URL = os.environ.get("JOINTLINE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def _postgres_reachable(url: str) -> str | None:
    if not url.startswith("postgres"):
        return None
    try:
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return str(exc).strip()


def _redis_reachable(url: str) -> str | None:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=3).ping()
        return None
    except redis.RedisError as exc:
        return str(exc)


_pg_problem = _postgres_reachable(TEST_DATABASE_URL)
_redis_problem = _redis_reachable(TEST_REDIS_URL)
if CI and (_pg_problem or _redis_problem):
    raise RuntimeError(
        "CI=true needs PostgreSQL and Redis: "
        f"postgres: {_pg_problem or 'ok'}; redis: {_redis_problem or 'ok'}"
    )
SERVICES_AVAILABLE = TEST_DATABASE_URL.startswith("postgres") and not _pg_problem and not _redis_problem
SERVICES_PROBLEM = _pg_problem or _redis_problem or "JOINTLINE_TEST_DATABASE_URL is not PostgreSQL"

if not _pg_problem:
    os.environ["DATABASE_URL"] = TEST_DATABASE_URL
else:
    os.environ.pop("DATABASE_URL", None)
if not _redis_problem:
    os.environ["REDIS_URL"] = TEST_REDIS_URL
else:
    os.environ.pop("REDIS_URL", None)
# Celery queues of this run only: parallel runs on one Redis must not take each other's tasks.
os.environ.setdefault("JOINTLINE_REDIS_KEY_PREFIX", f"jltest{os.getpid()}:")
os.environ.setdefault("JOINTLINE_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "var", "test"))

from config.settings import *  # noqa: E402, F403

# Tests run tasks in-process unless a test starts a real worker (tests/ingest/test_worker.py).
CELERY_TASK_ALWAYS_EAGER = True
JOINTLINE_STORE_MEMORY_ALLOWED = True  # the in-memory fake store (store/memory.py) runs the tests only
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if REDIS_URL:  # noqa: F405
    # the cache's keys under the run's prefix, and its clear() removes those only (tests/cache.py)
    CACHES["default"]["BACKEND"] = "tests.cache.RunCache"  # noqa: F405
    CACHES["default"]["KEY_PREFIX"] = REDIS_KEY_PREFIX  # noqa: F405
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# One test database per run, so parallel runs on one machine do not collide (SQLite tests run in memory).
if DATABASES["default"]["ENGINE"].endswith("postgresql"):  # noqa: F405
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": os.environ.get("JOINTLINE_TEST_DB_NAME", f"test_jointline_{os.getpid()}")
    }
