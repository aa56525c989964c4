"""What a test needs to run the project's own processes (gunicorn, Celery, ``manage.py``) or another
program beside it: a free port, the test database's URL, a second session on it (what another
process sees), a production process environment, the rule for a program that is not installed (skip,
except under ``CI=true``, where it fails), and tests run again in a pytest process of their own with
other settings (another database or store backend).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
CI = os.environ.get("CI", "").lower() == "true"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on at the moment of asking."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url() -> str:
    """The URL of the test database this pytest process created, for a process started from it."""
    db = connection.settings_dict
    return (
        f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )


def production_process_env(tmp_path: Path, **values: str) -> dict[str, str]:
    """The environment of a production process: none of the project's variables inherited from this
    one (so only ``values`` configure it), this interpreter first on ``PATH``, the repository on
    ``PYTHONPATH`` as the image sets it, ``config.settings`` with a long random secret, and data kept
    under ``tmp_path``."""
    inherited = {
        key: val
        for key, val in os.environ.items()
        if not key.startswith(("DJANGO_", "JOINTLINE_", "CELERY_", "PROMETHEUS_"))
        and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    return {
        **inherited,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "JOINTLINE_DATA_DIR": str(tmp_path / "data"),
        **values,
    }


@contextmanager
def gunicorn_server(tmp_path: Path, *, workers: int) -> Iterator[tuple[int, subprocess.Popen, Path]]:
    """gunicorn (``config/gunicorn.py``, ``workers`` sync workers) against the test database on a free
    loopback port, started once ``/healthz`` answers 200; yields (port, process, log file) and stops it
    (SIGTERM, then SIGKILL after 30 s) on the way out."""
    port = free_port()
    env = production_process_env(
        tmp_path,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        DATABASE_URL=database_url(),
        JOINTLINE_BIND=f"127.0.0.1:{port}",
        JOINTLINE_WEB_WORKERS=str(workers),
        JOINTLINE_WEB_ACCESS_LOG="false",
    )
    log = tmp_path / "web.log"
    command = [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not _answers(f"http://127.0.0.1:{port}/healthz"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        yield port, server, log
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def not_installed(reason: str) -> NoReturn:
    """Skip the test for a missing program or library, except under ``CI=true``, where it fails: CI
    must never pass by skipping."""
    if CI:
        pytest.fail(reason)
    pytest.skip(reason)


def pytest_in_subprocess(tests: list[str], env: dict[str, str], *, timeout_s: float) -> None:
    """Run ``tests`` (paths and pytest options) in a pytest process of their own with ``env`` over this
    one's environment, from the project root; fails with the end of its output unless they pass."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def own_connection():
    """A second session on the test database (PostgreSQL), autocommit, binding parameters on the
    client as Django does: what another process sees and does."""
    import psycopg

    db = connection.settings_dict
    return psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"] or "postgres",
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        autocommit=True,
        cursor_factory=psycopg.ClientCursor,
    )
