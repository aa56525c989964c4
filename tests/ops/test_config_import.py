"""Importing the ``config`` package (gunicorn's config file does, through ``config.env``) must not load
Django's settings: a master that loaded them before ``config/gunicorn.py`` set
``PROMETHEUS_MULTIPROC_DIR`` hands its workers settings without it, and each worker then counts only
its own requests on /metrics (a Celery setting read at import did exactly that)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_probe(probe: str, settings_module: str, **extra_env: str) -> str:
    """What ``probe`` prints, run by a fresh interpreter in the project's root (fails on its errors)."""
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": settings_module, **extra_env}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_config_does_not_load_the_django_settings():
    probe = (
        "import config, config.env\n"
        "from django.conf import settings\n"
        "print('configured' if settings.configured else 'lazy')\n"
    )
    output = run_probe(probe, "config.settings")
    assert output == "lazy"


def test_the_wsgi_application_loads_its_views_before_the_first_request():
    """A worker imports its views when it starts, not while its first request waits."""
    probe = "import sys, config.wsgi\nprint(all(m in sys.modules for m in ('promql.api', 'warroom.api')))\n"
    output = run_probe(probe, "tests.settings")
    assert output == "True"


def test_a_worker_collects_young_objects_less_often_than_python_by_default():
    """A long lanes request's young lists are not walked again by a collection every 700 objects."""
    probe = (
        "import gc\nbefore = gc.get_threshold()[0]\n"
        "import config.wsgi\nprint(before, gc.get_threshold()[0])\n"
    )
    output = run_probe(probe, "tests.settings")
    before, after = map(int, output.split())
    assert after >= 50 * before


def test_a_worker_imports_its_store_at_import_and_connects_in_gunicorns_worker_hook():
    """A worker imports its database engine's store when it loads the application, and opens its
    connection in gunicorn's ``post_worker_init``, not while its first request waits; importing the
    application alone (a test collecting it, another server) does not connect."""
    from tests.settings import SERVICES_AVAILABLE, SERVICES_PROBLEM, TEST_DATABASE_URL

    if not SERVICES_AVAILABLE:
        pytest.skip(SERVICES_PROBLEM)
    probe = (
        "import sys, config.wsgi\n"
        "from django.db import connection\n"
        "imported = connection.connection is not None\n"
        "import config.gunicorn\n"
        "config.gunicorn.post_worker_init(None)\n"
        "print('store.postgres' in sys.modules, imported, connection.connection is not None)\n"
    )
    # the server's maintenance database: the test settings' own database may exist only as pytest's copy
    server = TEST_DATABASE_URL.rsplit("/", 1)[0] + "/postgres"
    redis = {name: os.environ[name] for name in ("JOINTLINE_TEST_REDIS_URL",) if name in os.environ}
    output = run_probe(probe, "tests.settings", JOINTLINE_TEST_DATABASE_URL=server, **redis)
    assert output == "True False True"


def test_a_worker_keeps_the_memory_a_request_freed_for_the_next():
    """The arrays of a request (a dozen of 4 MB here) are made again on pages the previous one freed,
    not on new pages faulted in one by one (glibc gave the heap's free top back after each request)."""
    probe = (
        "import platform, resource, numpy as np\n"
        "import config.wsgi\n"
        "def request():\n"
        "    arrays = [np.ones(2**19) for _ in range(12)]\n"
        "    del arrays\n"
        "request()\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "request()\n"
        "print(platform.libc_ver()[0], resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)\n"
    )
    glibc, faults = run_probe(probe, "tests.settings").split()
    if glibc != "glibc":
        pytest.skip("not glibc's malloc")
    assert int(faults) < 12 * 4 * 2**20 // 4096 // 10


def test_a_workers_start_leaves_its_first_request_nothing_to_import_compile_or_fault_in():
    """What a worker's first request did and its second did not (lazy imports of Django's middleware,
    the URL patterns' regular expressions, new heap pages for its arrays) is done when it starts."""
    probe = (
        "import re, resource, sys, numpy as np\n"
        "import config.wsgi\n"
        "from config.warm import warm_worker\n"
        "warm_worker()\n"
        "imported, compiled, real = set(sys.modules), [], re.compile\n"
        "re.compile = lambda pattern, flags=0: compiled.append(pattern) or real(pattern, flags)\n"
        "from django.urls import resolve\n"
        "resolve('/prometheus/api/v1/query_range')\n"
        "from django.conf import settings\n"
        "from django.utils.module_loading import import_string\n"
        "import_string(settings.MESSAGE_STORAGE), import_string(settings.SESSION_SERIALIZER)\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "arrays = [np.ones(2**19) for _ in range(10)]\n"
        "faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before\n"
        "print(len(set(sys.modules) - imported), len(compiled), faults)\n"
    )
    imported, compiled, faults = map(int, run_probe(probe, "tests.settings").split())
    assert (imported, compiled) == (0, 0)
    assert faults < 10 * 4 * 2**20 // 4096 // 10
