"""The push edge: rate limits before the body, pushes while Redis is down, chunked request bodies.

The Redis outage runs against a private ``redis-server`` on a port of its own (the machine's Redis
is never stopped), with a real gunicorn and a real Celery worker. Chunked bodies are sent with
``http.client`` to a real gunicorn and to the development server (``manage.py runserver``).
"""

from __future__ import annotations

import gzip
import http.client
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.test import TestCase, override_settings

from ingest import ratelimit
from ingest.models import BatchStatus, IngestBatch
from orgs.models import Organization
from orgs.services import organization_create, token_create
from tests.conftest import nic_batch, post_body, push
from tests.ingest.protocol_helpers import now_ms, snappy, write_request
from tests.processes import database_url, free_port, production_process_env

ROOT = Path(__file__).resolve().parents[2]
SERVER_MAX_BYTES = 64 * 1024  # JOINTLINE_PUSH_MAX_BYTES of the servers started here


# -- helpers ---------------------------------------------------------------------------------------


@pytest.fixture
def same_minute():
    """The rate limits count in fixed minutes: start a test early enough in one to finish inside it."""
    into_minute = time.time() % ratelimit.WINDOW_S
    if into_minute > ratelimit.WINDOW_S - 15:
        time.sleep(ratelimit.WINDOW_S - into_minute + 0.1)


@pytest.fixture
def fresh_outage(monkeypatch):
    """This process's view of a Redis outage, new for the test and forgotten after it."""
    monkeypatch.setattr(ratelimit, "_outage", ratelimit._Outage())


class UnreadBody:
    """A ``wsgi.input`` that records whether anything read it."""

    def __init__(self, data: bytes):
        self.data = data
        self.reads = 0

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        return self.data if size < 0 else self.data[:size]

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


def server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a production process against the test database and the given Redis."""
    return production_process_env(
        tmp_path,
        **{
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "JOINTLINE_REDIS_KEY_PREFIX": f"jledge{os.getpid()}:",
            "JOINTLINE_WEB_WORKERS": "1",
            "JOINTLINE_WEB_ACCESS_LOG": "false",
            "JOINTLINE_PUSH_MAX_BYTES": str(SERVER_MAX_BYTES),
            **extra,
        },
    )


def _logs(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path, *, port: int | None = None):
    """A process of ours, stopped at the end; with ``port``, started once ``/healthz`` answers there."""
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    try:
        if port is not None:
            deadline = time.monotonic() + 60
            while _status(port, "/healthz") != 200:
                assert process.poll() is None, _logs(log)
                assert time.monotonic() < deadline, f"no /healthz on {port}\n{_logs(log)}"
                time.sleep(0.1)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _status(port: int, path: str) -> int:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", path)
        return conn.getresponse().status
    except OSError:
        return 0


def gunicorn_command() -> list[str]:
    return [sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi"]


def runserver_command(port: int) -> list[str]:
    return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]


def worker_command() -> list[str]:
    return [
        *(sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "ingest,jointline"),
        *("--pool", "solo", "--without-heartbeat", "--without-gossip", "--without-mingle"),
    ]


def send(
    port: int,
    path: str,
    body: bytes,
    headers: dict[str, str],
    *,
    chunk: int | None = 1000,
    conn: http.client.HTTPConnection | None = None,
):
    """POST ``body``, as ``Transfer-Encoding: chunked`` pieces of ``chunk`` bytes (or with a
    Content-Length when ``chunk`` is None); returns (status, headers, body)."""
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    if chunk is None:
        conn.request("POST", path, body=body, headers=headers)
    else:
        pieces = (body[i : i + chunk] for i in range(0, len(body), chunk))
        conn.request("POST", path, body=pieces, headers=headers, encode_chunked=True)
    response = conn.getresponse()
    return response.status, response.headers, response.read()


def bearer(token: str, content_type: str = "application/json", **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Content-Type": content_type, **extra}


def native_body(**kwargs) -> bytes:
    return json.dumps(nic_batch(**kwargs)).encode()


def stored_samples() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM timeline_sample")
        return cursor.fetchone()[0]


def wait_until(predicate, timeout_s: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"{what} within {timeout_s} s\n{_logs(log) if log else ''}")


class PrivateRedis:
    """A redis-server of this test alone, on a port of its own, without persistence."""

    def __init__(self, tmp_path: Path):
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tmp_path / "redis"
        self.dir.mkdir()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is missing: apt-get install redis-server")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=self.dir,
            stdout=(self.dir / "redis.log").open("ab"),
            stderr=subprocess.STDOUT,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                assert time.monotonic() < deadline, "the private redis-server did not start"
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def pause(self) -> None:
        """Hang: connections are still accepted (by the kernel), nothing is answered."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    if server.process is not None and server.process.poll() is None:
        server.resume()  # a stopped process does not act on SIGKILL until it runs again
    server.stop()


@pytest.fixture
def own_cache(private_redis, fresh_outage):
    """The rate counters in a Redis of this test alone: other test runs flush the shared one."""
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": private_redis.url}
    }
    with override_settings(CACHES=caches):
        yield


# -- the rate limit is checked before the body is read -----------------------------------------------


@pytest.mark.services
def test_an_organisation_over_its_push_rate_gets_429_without_its_body_being_read(
    pusher_a, org_a, same_minute, own_cache
):
    Organization.objects.filter(pk=org_a.pk).update(push_requests_per_minute=1)
    assert push(pusher_a, nic_batch()).status_code == 202
    body = UnreadBody(b"{not json")  # would be a 400 if it were read
    response = pusher_a.post(
        "/api/v1/push", data=body.data, content_type="application/json", **{"wsgi.input": body}
    )
    assert response.status_code == 429, response.content
    assert "pushes per minute" in response.json()["error"]
    assert int(response["Retry-After"]) >= 1
    assert body.reads == 0


@pytest.mark.services
def test_a_push_over_the_sample_budget_blocks_the_next_push_before_its_body_is_read(
    pusher_a, org_a, same_minute, own_cache
):
    Organization.objects.filter(pk=org_a.pk).update(push_samples_per_minute=8)
    assert push(pusher_a, nic_batch(points=5)).status_code == 202
    over = push(pusher_a, nic_batch(points=5, start_s=1_781_486_000))
    assert over.status_code == 429 and "8 samples per minute" in over.json()["error"]
    body = UnreadBody(b"{not json")
    response = pusher_a.post(
        "/api/v1/push", data=body.data, content_type="application/json", **{"wsgi.input": body}
    )
    assert response.status_code == 429, response.content
    assert "samples for this minute already" in response.json()["error"]
    assert body.reads == 0
    assert IngestBatch.objects.count() == 1


@pytest.mark.services
def test_a_protocol_push_over_the_limit_gets_429_before_parsing(pusher_a, org_a, same_minute, own_cache):
    Organization.objects.filter(pk=org_a.pk).update(push_requests_per_minute=1)
    assert push(pusher_a, nic_batch()).status_code == 202
    response = post_body(
        pusher_a,
        "/api/v1/write",
        b"not snappy at all",
        "application/x-protobuf",
        HTTP_CONTENT_ENCODING="snappy",
    )
    assert response.status_code == 429, response.content


def _upload(client, data: bytes, name: str, **fields):
    handle = io.BytesIO(data)
    handle.name = name
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post("/api/v1/import", {"file": handle, **fields}, format="multipart")


CSV_MAPPING = json.dumps({"ts": "t", "metric": "m", "value": "v"})


def _csv(rows: int) -> bytes:
    return b"t,m,v\n" + b"".join(f"{1_781_485_200 + 15 * i},imported,{i}\n".encode() for i in range(rows))


@pytest.mark.services
def test_imported_samples_count_against_the_sample_budget(pusher_a, org_a, same_minute, own_cache):
    Organization.objects.filter(pk=org_a.pk).update(push_samples_per_minute=10)
    response = _upload(pusher_a, _csv(12), "m.csv", format="csv", mapping=CSV_MAPPING)
    assert response.status_code == 202, response.content
    assert response.json()["samples"] == 12
    refused = push(pusher_a, nic_batch(points=1))
    assert refused.status_code == 429, refused.content
    assert "samples for this minute already" in refused.json()["error"]


@pytest.mark.services
def test_an_import_over_the_push_rate_gets_429_before_the_upload_is_read(
    pusher_a, org_a, same_minute, own_cache
):
    Organization.objects.filter(pk=org_a.pk).update(push_requests_per_minute=1)
    assert push(pusher_a, nic_batch()).status_code == 202
    response = _upload(pusher_a, b"not, a, valid, file\n", "m.csv", format="csv", mapping="{nope")
    assert response.status_code == 429, response.content
    assert IngestBatch.objects.count() == 1


# -- Redis down, in this process -------------------------------------------------------------------


def _dead_redis_caches() -> dict:
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 1},
        }
    }


@pytest.mark.services
def test_pushes_while_redis_is_down_are_journaled_and_warned_about_once(pusher_a, fresh_outage, caplog):
    caplog.set_level(logging.WARNING, logger="ingest.ratelimit")
    with override_settings(CACHES=_dead_redis_caches(), JOINTLINE_RATE_LIMIT_FAIL_OPEN_S=300):
        responses = [push(pusher_a, nic_batch(node=f"node-{i}")) for i in range(3)]
        imported = _upload(pusher_a, _csv(3), "m.csv", format="csv", mapping=CSV_MAPPING)
    assert [r.status_code for r in responses] == [202, 202, 202], responses[0].content
    assert imported.status_code == 202, imported.content
    assert IngestBatch.objects.count() == 4
    warnings = [r for r in caplog.records if r.name == "ingest.ratelimit"]
    assert len(warnings) == 1 and "Redis" in warnings[0].getMessage()


@pytest.mark.services
def test_past_the_fail_open_window_a_push_gets_a_json_503_naming_redis(pusher_a, fresh_outage):
    with override_settings(CACHES=_dead_redis_caches(), JOINTLINE_RATE_LIMIT_FAIL_OPEN_S=0):
        response = push(pusher_a, nic_batch())
        otlp = post_body(pusher_a, "/v1/metrics", b"{}", "application/json")
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert "Redis" in response.json()["error"]
    assert int(response["Retry-After"]) >= 1
    assert otlp.status_code == 503 and otlp.json()["code"] == 14  # google.rpc.Status UNAVAILABLE
    assert "Redis" in otlp.json()["message"]
    assert IngestBatch.objects.count() == 0


# -- Redis down, with gunicorn and a worker --------------------------------------------------------


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server processes must see the organisation and token
def test_redis_down_pushes_are_journaled_then_refused_with_503_and_applied_once_it_returns(
    private_redis, tmp_path
):
    org, _ = organization_create(slug="edge", name="Edge test")
    token = token_create(org=org, name="agent").secret
    port = free_port()
    fail_open_s = 4.0
    env = server_env(
        tmp_path,
        REDIS_URL=private_redis.url,
        JOINTLINE_BIND=f"127.0.0.1:{port}",
        JOINTLINE_RATE_LIMIT_FAIL_OPEN_S=str(fail_open_s),
        JOINTLINE_SWEEP_AFTER_S="1",
    )
    web_log, worker_log = tmp_path / "web.log", tmp_path / "worker.log"
    rw_body = snappy(
        write_request([([("__name__", "edge_up"), ("job", "edge")], [(1.0, now_ms() - 60_000)])])
    )
    rw_headers = bearer(token, "application/x-protobuf", **{"Content-Encoding": "snappy"})

    with running(gunicorn_command(), env, web_log, port=port):
        status, _, answer = send(port, "/api/v1/push", native_body(node="node-1"), bearer(token), chunk=None)
        assert status == 202, answer

        private_redis.stop()
        down_at = time.monotonic()
        started = time.perf_counter()
        status, headers, answer = send(
            port, "/api/v1/push", native_body(node="node-2"), bearer(token), chunk=None
        )
        down_push_s = time.perf_counter() - started
        assert status == 202, answer + _logs(web_log).encode()
        assert headers["Content-Type"] == "application/json"
        assert IngestBatch.objects.get(pk=json.loads(answer)["batch"]).status == BatchStatus.ACCEPTED
        status, _, answer = send(port, "/api/v1/write", rw_body, rw_headers, chunk=None)
        assert status == 204, answer

        time.sleep(max(0.0, down_at + fail_open_s + 0.5 - time.monotonic()))
        status, headers, answer = send(
            port, "/api/v1/push", native_body(node="node-3"), bearer(token), chunk=None
        )
        assert status == 503, answer
        assert headers["Content-Type"] == "application/json"
        assert "Redis" in json.loads(answer)["error"]
        assert int(headers["Retry-After"]) >= 1
        assert IngestBatch.objects.count() == 3  # node-1, node-2, remote_write; node-3 was not kept

        private_redis.start()
        with running(worker_command(), env, worker_log):
            # What beat sends every minute: the sweeper enqueues what Redis lost or never got.
            subprocess.run(
                [sys.executable, "-m", "celery", "-A", "config", "call", "ingest.tasks.sweep_journal"],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                timeout=60,
            )
            wait_until(
                lambda: IngestBatch.objects.filter(status=BatchStatus.APPLIED).count() == 3,
                120,
                "the worker applied every journaled push",
                worker_log,
            )
        assert stored_samples() == 5 + 5 + 1

        time.sleep(ratelimit.RETRY_INTERVAL_S)
        status, _, answer = send(port, "/api/v1/push", native_body(node="node-4"), bearer(token), chunk=None)
        assert status == 202, answer
        assert list(private_redis.client().scan_iter("*jl:rate:*")), "the limits are counted again"
    print(f"\na push while Redis was down (connection refused) answered in {down_push_s * 1000:.0f} ms")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the organisation and token
def test_a_push_while_redis_hangs_is_journaled_after_bounded_waits(private_redis, tmp_path):
    """A Redis that accepts connections and never answers (failover, a dropped route): the rate
    limiter and the enqueue give up after JOINTLINE_REDIS_TIMEOUT_S instead of holding the push."""
    org, _ = organization_create(slug="edge", name="Edge test")
    token = token_create(org=org, name="agent").secret
    port = free_port()
    env = server_env(
        tmp_path,
        REDIS_URL=private_redis.url,
        JOINTLINE_BIND=f"127.0.0.1:{port}",
        JOINTLINE_REDIS_TIMEOUT_S="1",
    )
    with running(gunicorn_command(), env, tmp_path / "web.log", port=port):
        assert send(port, "/api/v1/push", native_body(node="node-1"), bearer(token), chunk=None)[0] == 202
        private_redis.pause()
        seconds = []
        try:
            for i in range(2):
                started = time.perf_counter()
                status, _, answer = send(
                    port, "/api/v1/push", native_body(node=f"node-{i + 2}"), bearer(token), chunk=None
                )
                seconds.append(time.perf_counter() - started)
                assert status == 202, answer
        finally:
            private_redis.resume()
    assert IngestBatch.objects.filter(status=BatchStatus.ACCEPTED).count() == 3
    print(f"\npushes while Redis hung answered in {', '.join(f'{s:.1f}' for s in seconds)} s")


# -- chunked request bodies -------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["gunicorn", "runserver"])
def edge_server(request, django_db_setup, django_db_blocker, tmp_path_factory):
    """A real server on the test database: gunicorn (production) or the development server."""
    tmp_path = tmp_path_factory.mktemp(request.param)
    port = free_port()
    with django_db_blocker.unblock():
        env = server_env(tmp_path, JOINTLINE_BIND=f"127.0.0.1:{port}")
    command = gunicorn_command() if request.param == "gunicorn" else runserver_command(port)
    with running(command, env, tmp_path / "server.log", port=port):
        yield port


@pytest.fixture
def edge_token() -> tuple[Organization, str]:
    org, _ = organization_create(slug="edge", name="Edge test")
    return org, token_create(org=org, name="agent").secret


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_chunked_native_push_is_journaled(edge_server, edge_token, encoding):
    org, token = edge_token
    body = native_body(points=40)
    if encoding == "gzip":
        body = gzip.compress(body)
    status, _, answer = send(
        edge_server, "/api/v1/push", body, bearer(token, **{"Content-Encoding": encoding})
    )
    assert status == 202, answer
    entry = IngestBatch.objects.get(pk=json.loads(answer)["batch"])
    assert (entry.org_id, entry.sample_count, entry.event_count) == (org.pk, 40, 1)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_chunked_pushes_follow_each_other_on_one_connection(edge_server, edge_token):
    _, token = edge_token
    conn = http.client.HTTPConnection("127.0.0.1", edge_server, timeout=30)
    statuses = [
        send(edge_server, "/api/v1/push", native_body(node=f"node-{i}"), bearer(token), conn=conn)[0]
        for i in range(3)
    ]
    assert statuses == [202, 202, 202]
    assert IngestBatch.objects.count() == 3


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_a_chunked_remote_write_is_stored(edge_server, edge_token):
    _, token = edge_token
    samples = [(float(i), now_ms() - 60_000 + i * 1000) for i in range(30)]
    body = snappy(write_request([([("__name__", "edge_up"), ("job", "edge")], samples)]))
    headers = bearer(token, "application/x-protobuf", **{"Content-Encoding": "snappy"})
    status, _, answer = send(edge_server, "/api/v1/write", body, headers, chunk=100)
    assert status == 204, answer
    assert IngestBatch.objects.get().sample_count == 30


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_a_chunked_gzip_otlp_export_is_stored(edge_server, edge_token):
    _, token = edge_token
    t0 = (now_ms() - 60_000) * 1_000_000
    points = [{"timeUnixNano": str(t0 + i * 10**9), "asDouble": float(i)} for i in range(20)]
    document = {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "node-3"}}]},
                "scopeMetrics": [{"metrics": [{"name": "edge.gauge", "gauge": {"dataPoints": points}}]}],
            }
        ]
    }
    body = gzip.compress(json.dumps(document).encode())
    status, headers, answer = send(
        edge_server, "/v1/metrics", body, bearer(token, **{"Content-Encoding": "gzip"}), chunk=64
    )
    assert status == 200, answer
    assert headers["Content-Type"] == "application/json"
    assert IngestBatch.objects.get().sample_count == 20


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_a_chunked_file_import_is_journaled(edge_server, edge_token):
    _, token = edge_token
    boundary = "edge-boundary-7f3a"
    fields = {"format": "csv", "mapping": CSV_MAPPING}
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n".encode()
        + _csv(25)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = bearer(token, f"multipart/form-data; boundary={boundary}")
    status, _, answer = send(edge_server, "/api/v1/import", b"".join(parts), headers, chunk=200)
    assert status == 202, answer
    assert json.loads(answer)["samples"] == 25


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_a_chunked_body_over_the_limit_gets_413_before_it_ends(edge_server, edge_token):
    """The body never ends (no last chunk): a server reading it to its end would never answer."""
    _, token = edge_token
    chunk = b"x" * 8192
    with socket.create_connection(("127.0.0.1", edge_server), timeout=30) as sock:
        head = (
            f"POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1:{edge_server}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent = 0
        while sent < 8 * SERVER_MAX_BYTES and not select.select([sock], [], [], 0)[0]:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        answer = _read_response(sock)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert f"limit of {SERVER_MAX_BYTES} bytes".encode() in answer
    assert sent > SERVER_MAX_BYTES
    assert IngestBatch.objects.count() == 0


def _read_response(sock: socket.socket) -> bytes:
    """Head and body of the first response (its Content-Length says where it ends)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(sock)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += _recv(sock)
    return head + b"\r\n\r\n" + body[:length]


def _recv(sock: socket.socket) -> bytes:
    part = sock.recv(65536)
    assert part, "the server closed the connection without an answer"
    return part


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the server must see the token
def test_a_chunked_body_with_broken_framing_gets_400(edge_server, edge_token):
    _, token = edge_token
    with socket.create_connection(("127.0.0.1", edge_server), timeout=30) as sock:
        sock.sendall(
            (
                f"POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1:{edge_server}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
            ).encode()
        )
        answer = _read_response(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:300]
    errors = json.loads(answer.partition(b"\r\n\r\n")[2])["errors"]
    assert errors[0]["field"] == "Transfer-Encoding" and "chunk size" in errors[0]["reason"].lower(), errors
