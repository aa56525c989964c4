"""The benchmarks' harness tells when gunicorn's workers are ready without sending them a request, so a
benchmark's first request is the first a worker answers (``bench/promql.py``'s ``first`` column,
``--first``): a real gunicorn, whose workers take a while in ``post_worker_init`` as Jointline's do,
and which writes down every request its application gets."""

from __future__ import annotations

import sys
import time
import urllib.request
from pathlib import Path

from bench import _harness

APP = """
import os

def application(environ, start_response):
    with open(os.environ["REQUESTS_SEEN"], "a") as seen:
        seen.write(environ["PATH_INFO"] + "\\n")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""
CONFIG = """
import time

worker_tmp_dir = "/dev/shm"

def post_worker_init(worker):
    time.sleep(1.5)
"""


def test_workers_are_ready_once_each_waits_for_a_request_and_none_was_sent(tmp_path: Path):
    (tmp_path / "seen_app.py").write_text(APP)
    (tmp_path / "conf.py").write_text(CONFIG)
    seen = tmp_path / "seen.txt"
    port = _harness.free_port()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "REQUESTS_SEEN": str(seen)}
    command = [sys.executable, "-m", "gunicorn", "-c", str(tmp_path / "conf.py"), "-w", "2"]
    command += ["-b", f"127.0.0.1:{port}", "seen_app:application"]
    process = _harness.start_process(command, env, tmp_path / "gunicorn.log", tmp_path)
    try:
        started = time.monotonic()
        _harness.wait_until(
            lambda: _harness.workers_waiting(process.pid, 2),
            timeout_s=30,
            what="gunicorn",
            process=process,
            log=tmp_path / "gunicorn.log",
        )
        assert time.monotonic() - started >= 1.5  # not before post_worker_init has returned
        assert not seen.exists()  # no request was sent to tell
        assert not _harness.workers_waiting(process.pid, 3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/first", timeout=10) as response:
            assert response.read() == b"ok"
        assert seen.read_text() == "/first\n"
    finally:
        _harness.stop_process(process)
