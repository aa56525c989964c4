"""Production without containers: the compose file's own command lines, against the test database and Redis.

The deploy test reads the commands of the ``migrate``, ``web``, ``worker`` and
``beat`` services from docker/compose.yml and runs exactly those, from the
repository root with ``PYTHONPATH`` set as the image sets it, so what is tested
here is what the containers run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
import yaml
from django.conf import settings
from django.urls import Resolver404, resolve

from ingest.models import BatchStatus, IngestBatch
from orgs.services import organization_create, token_create
from tests.conftest import nic_batch
from tests.ops.conftest import parse_exposition, value
from tests.processes import database_url, free_port, production_process_env

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker" / "compose.yml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
HOST = "jointline.example"
APP_SERVICES = ("migrate", "web", "ingest", "worker", "beat")
EXPECTED_COMMANDS = {
    "migrate": ["python", "manage.py", "migrate", "--noinput"],
    "web": ["gunicorn", "-c", "config/gunicorn.py", "config.wsgi"],
    # the same application in its own pool, for the agents' pushes (the proxy routes them there)
    "ingest": ["gunicorn", "-c", "config/gunicorn.py", "config.wsgi"],
    "worker": [
        *("celery", "-A", "config", "worker", "-Q", "ingest,jointline"),
        *("--concurrency", "2", "--loglevel", "INFO"),
    ],
    "beat": ["celery", "-A", "config", "beat", "--loglevel", "INFO"],
}
_VARIABLE = re.compile(r"\$\$|\$\{(\w+)(?::?-([^}]*))?\}")


# -- the compose file ------------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``$$``, as ``docker compose`` expands them."""

    def expand(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        return env.get(name) or (default if default is not None else "")

    return _VARIABLE.sub(expand, text)


def compose_commands(env: dict[str, str] | None = None) -> dict[str, list[str]]:
    services = compose()["services"]
    return {
        name: [interpolate(str(part), env or {}) for part in services[name]["command"]]
        for name in APP_SERVICES
    }


def test_the_compose_services_run_the_commands_this_test_runs():
    assert compose_commands() == EXPECTED_COMMANDS
    cmd = next(line for line in DOCKERFILE.read_text().splitlines() if line.startswith("CMD "))
    assert json.loads(cmd.removeprefix("CMD ")) == EXPECTED_COMMANDS["web"]


def test_the_compose_file_is_valid():
    if shutil.which("docker") and _docker_compose_works():
        result = subprocess.run(
            ["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
    spec = compose()
    services = spec["services"]
    assert set(services) == {
        *("secrets", "migrate", "web", "ingest", "worker", "beat", "postgres", "redis", "clickhouse")
    }
    # ClickHouse starts only with its profile; the app services wait for it only when it runs
    clickhouse = services["clickhouse"]
    assert clickhouse["profiles"] == ["clickhouse"] and clickhouse["image"].startswith(
        "clickhouse/clickhouse-server:"
    )
    assert clickhouse["healthcheck"]["test"]
    for name in APP_SERVICES:
        service = services[name]
        assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}, name
        assert service["read_only"] is True and service["tmpfs"] == ["/tmp"], name  # noqa: S108
        environment = service["environment"]
        # secrets come from files, never from the compose file or the shell
        assert environment["DATABASE_URL_FILE"].startswith("/run/jointline-secrets/"), name
        assert environment["DJANGO_SECRET_KEY_FILE"].startswith("/run/jointline-secrets/"), name
        assert not {"DATABASE_URL", "DJANGO_SECRET_KEY", "POSTGRES_PASSWORD"} & set(environment), name
        assert all(services[dep] for dep in service["depends_on"]), name
        assert service["depends_on"].get("clickhouse", {"required": False})["required"] is False, name
    for name in ("web", "ingest", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert services["postgres"]["image"] == "postgres:15"
    assert services["redis"]["image"].startswith("redis:7")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/jointline-secrets/")
    for name in ("postgres", "redis", "worker"):
        assert services[name]["healthcheck"]["test"], name
    used_volumes = {
        mount.split(":", 1)[0] for service in services.values() for mount in service.get("volumes", [])
    }
    assert used_volumes == set(spec["volumes"])
    assert used_volumes == {"postgres-data", "redis-data", "clickhouse-data", "clickhouse-logs", "secrets"}
    assert "HEALTHCHECK" in DOCKERFILE.read_text() and "/healthz" in DOCKERFILE.read_text()


def _docker_compose_works() -> bool:
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


# -- manage.py check --deploy ------------------------------------------------------------------------


def production_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A production environment: long random secret, a real host name, HTTPS behind a proxy."""
    return production_process_env(
        tmp_path,
        **{
            "DJANGO_ALLOWED_HOSTS": HOST,
            "JOINTLINE_HTTPS": "true",
            "JOINTLINE_TRUST_X_FORWARDED_PROTO": "true",
            **extra,
        },
    )


def deploy_issues(env: dict[str, str]) -> list[str]:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    issues = re.findall(r"\((\w+\.[EW]\d+)\)", result.stdout + result.stderr)
    # drf-spectacular adds its schema warnings to --deploy: they are about API documentation,
    # not about the deployment.
    return sorted(issue for issue in set(issues) if not issue.startswith("drf_spectacular."))


def test_check_deploy_is_clean_with_the_production_environment(tmp_path):
    assert deploy_issues(production_env(tmp_path)) == []


def test_check_deploy_flags_the_embedded_default(tmp_path):
    env = production_env(tmp_path)
    for name in (
        "DJANGO_SECRET_KEY",
        "DJANGO_ALLOWED_HOSTS",
        "JOINTLINE_HTTPS",
        "JOINTLINE_TRUST_X_FORWARDED_PROTO",
    ):
        env.pop(name)
    assert {"security.W004", "security.W008", "security.W012", "security.W016"} <= set(deploy_issues(env))


# -- gunicorn + worker + beat against the test database --------------------------------------------


def _ops_wired_in_config() -> bool:
    wanted = {"ops.middleware.ProbeMiddleware", "ops.middleware.ApiMetricsMiddleware"}
    try:
        resolve("/readyz", urlconf="config.urls")
    except Resolver404:
        return False
    return wanted <= set(settings.MIDDLEWARE)


class Site:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, *, body: bytes | None = None, https: bool = True, **headers):
        """(status, headers, body) of one request, as a client behind the TLS proxy would send it."""
        headers = {"Host": HOST, **({"X-Forwarded-Proto": "https"} if https else {}), **headers}
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=10) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read()

    def probe(self, path: str):
        """A probe as Docker or Prometheus sends it: plain HTTP, the Host an IP and port."""
        return self.request("GET", path, https=False, Host=self.base.removeprefix("http://"))

    def metrics(self) -> dict:
        status, _, body = self.probe("/metrics")
        assert status == 200, body[:500]
        return parse_exposition(body.decode())


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def wait_for(predicate, timeout_s: float, what: str, logs: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    logs_text = "\n".join(f"== {p.name}\n{p.read_text()[-2500:]}" for p in sorted(logs.glob("*.log")))
    pytest.fail(f"{what} within {timeout_s} s\n{logs_text}")


@pytest.fixture
def redis_key_prefix():
    """Keys of this test alone on the shared Redis: queues and heartbeats of other runs stay apart."""
    prefix = f"jldeploy{os.getpid()}:"
    client = redis.Redis.from_url(settings.REDIS_URL)

    def forget() -> None:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)

    forget()
    yield prefix
    forget()


@pytest.fixture
def services_env(tmp_path, redis_key_prefix):
    return production_env(
        tmp_path,
        DJANGO_SETTINGS_MODULE="config.settings" if _ops_wired_in_config() else "tests.ops.wired_settings",
        DATABASE_URL=database_url(),
        REDIS_URL=settings.REDIS_URL,
        JOINTLINE_REDIS_KEY_PREFIX=redis_key_prefix,
        JOINTLINE_BIND=f"127.0.0.1:{free_port()}",
        JOINTLINE_WEB_WORKERS="2",
        JOINTLINE_BEAT_SCHEDULE_FILE=str(tmp_path / "celerybeat-schedule"),
        JOINTLINE_WORKER_HEARTBEAT_FILE=str(tmp_path / "worker-heartbeat"),
    )


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the subprocesses must see the organisation and token
def test_gunicorn_worker_and_beat_serve_production_with_the_compose_commands(services_env, tmp_path):
    env = services_env
    commands = compose_commands(env)
    org, _ = organization_create(slug="deploy", name="Deploy test")
    token = token_create(org=org, name="agent").secret

    migrate = subprocess.run(
        commands["migrate"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr

    processes: dict[str, subprocess.Popen] = {}

    # ingest runs web's command line on an address of its own (compose gives it its own container)
    ingest_env = {**env, "JOINTLINE_BIND": f"127.0.0.1:{free_port()}"}

    def start(name: str, environment: dict[str, str] = env) -> None:
        log = (tmp_path / f"{name}.log").open("wb")
        processes[name] = subprocess.Popen(
            commands[name], cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT
        )

    try:
        site = Site(int(env["JOINTLINE_BIND"].rsplit(":", 1)[1]))
        intake = Site(int(ingest_env["JOINTLINE_BIND"].rsplit(":", 1)[1]))
        started = time.monotonic()
        start("web")
        wait_for(lambda: _status(site, "/healthz") == 200, 60, "gunicorn answered /healthz", tmp_path)
        web_up_s = time.monotonic() - started
        start("ingest", ingest_env)
        wait_for(lambda: _status(intake, "/healthz") == 200, 60, "ingest answered /healthz", tmp_path)
        assert _status(site, "/readyz") == 503  # no worker yet

        started = time.monotonic()
        start("worker")
        start("beat")
        wait_for(lambda: _status(site, "/readyz") == 200, 90, "/readyz became 200", tmp_path)
        ready_s = time.monotonic() - started
        assert (tmp_path / "worker-heartbeat").exists()

        # Agents push to ingest; its master counts the pushes, the worker counters are the same everywhere.
        before = intake.metrics()
        pushed = []
        for i in range(3):
            body = json.dumps(nic_batch(node=f"node-{i}", points=25)).encode()
            status, _, answer = intake.request(
                "POST",
                "/api/v1/push",
                body=body,
                **{"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            assert status == 202, answer
            pushed.append(json.loads(answer)["batch"])
        wait_for(
            lambda: IngestBatch.objects.filter(pk__in=pushed, status=BatchStatus.APPLIED).count() == 3,
            60,
            "the worker applied the pushed batches",
            tmp_path,
        )
        wait_for(
            lambda: (
                value(intake.metrics(), "jointline_samples_applied_total")
                >= value(before, "jointline_samples_applied_total") + 75
            ),
            10,
            "the applied samples showed on /metrics",
            tmp_path,
        )
        after = intake.metrics()

        def delta(name, **labels):
            return value(after, name, **labels) - value(before, name, **labels)

        assert delta("jointline_push_requests_total", protocol="native", org="deploy", status="202") == 3
        assert delta("jointline_samples_accepted_total", protocol="native", org="deploy") == 75
        assert (
            delta("jointline_worker_tasks_total", task="ingest.tasks.apply_batch", outcome="succeeded") >= 3
        )
        assert delta("jointline_samples_applied_total") == 75
        assert value(after, "jointline_workers_alive") >= 1

        # Production settings are in force: plain HTTP is sent to HTTPS, HTTPS answers carry HSTS.
        status, headers, _ = site.request("GET", "/api/v1/series", https=False)
        assert status == 301 and headers["Location"].startswith(f"https://{HOST}/")
        status, headers, _ = site.request("GET", "/login/")
        assert status == 200 and "max-age=31536000" in headers["Strict-Transport-Security"]

        readyz_ms = _latencies_ms(site, "/readyz", 40)
        assert statistics.median(readyz_ms) < 250
        print(
            f"\ngunicorn answered /healthz {web_up_s:.1f} s after start; "
            f"/readyz was 200 {ready_s:.1f} s after the worker started; "
            f"/readyz latency median {statistics.median(readyz_ms):.1f} ms, "
            f"max {max(readyz_ms):.1f} ms over {len(readyz_ms)} requests"
        )
        assert processes["beat"].poll() is None, (tmp_path / "beat.log").read_text()[-2000:]
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    for name in ("web", "ingest"):
        leftover = Path(tempfile.gettempdir()) / f"jointline-prometheus-{processes[name].pid}"
        assert not leftover.exists(), f"gunicorn ({name}) left its metric files behind"


def _status(site: Site, path: str) -> int:
    try:
        return site.probe(path)[0]
    except OSError:
        return 0


def _latencies_ms(site: Site, path: str, count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.perf_counter()
        assert site.probe(path)[0] == 200
        out.append((time.perf_counter() - started) * 1000)
    return out


# -- the image's files -----------------------------------------------------------------------------

_COPY = re.compile(r"^COPY\s+(?!--)(\S+)\s+(\S+)\s*$", re.MULTILINE)


def test_the_image_copies_every_package_the_application_imports(tmp_path):
    """The Dockerfile's ``COPY`` lines, done into an empty directory, give an application that starts:
    Django's checks pass there and every package of ``pyproject.toml`` is imported from that directory
    (not from this checkout, which an editable install would put on the path)."""
    app = tmp_path / "app"
    app.mkdir()
    for source, target in _COPY.findall(DOCKERFILE.read_text()):
        if source.startswith("docker/"):
            continue  # the entrypoint script
        origin, destination = ROOT / source, app / target.removeprefix("./")
        if origin.is_dir():
            shutil.copytree(origin, destination, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy(origin, destination if target not in {"./", "."} else app / origin.name)
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    roots = sorted(name.rstrip("*") for name in packages["include"])
    probe = (
        "import importlib, sys, django; from pathlib import Path; django.setup(); "
        "from django.core.management import call_command; call_command('check'); "
        f"outside = [n for n in {roots!r} if Path(importlib.import_module(n).__file__).resolve()"
        f".parents[1] != Path({str(app)!r}).resolve()]; "
        "sys.exit(f'imported from elsewhere: {outside}' if outside else 0)"
    )
    env = production_process_env(tmp_path, PYTHONPATH=str(app))
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
