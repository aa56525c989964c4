"""Every task beat sends is one the production worker runs: its name is registered in a worker process
(a task the worker does not know is discarded as unregistered, and nothing else says so), and it is
routed to a queue that worker consumes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.ops.test_deploy import (  # noqa: F401 (fixtures)
    EXPECTED_COMMANDS,
    ROOT,
    compose_commands,
    redis_key_prefix,
    services_env,
    wait_for,
)
from tests.processes import production_process_env

# What ``celery -A config worker`` does before it consumes: load the app, let it import its task
# modules (the Django fixup sets Django up first), then look tasks up by name in ``app.tasks``.
WORKER_VIEW = """
import json
from config import celery_app as app

app.loader.import_default_modules()
schedule = {name: entry["task"] for name, entry in app.conf.beat_schedule.items()}
print(json.dumps({
    "registered": sorted(app.tasks),
    "schedule": schedule,
    "queues": {task: app.amqp.router.route({}, task)["queue"].name for task in schedule.values()},
}))
"""


def _worker_view(tmp_path) -> dict:
    env = production_process_env(tmp_path, REDIS_URL="redis://127.0.0.1:6379/15")
    result = subprocess.run(
        [sys.executable, "-c", WORKER_VIEW], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_worker_registers_every_task_beat_sends(tmp_path):
    view = _worker_view(tmp_path)
    assert view["schedule"], "beat has a schedule"
    unregistered = {name: task for name, task in view["schedule"].items() if task not in view["registered"]}
    assert unregistered == {}


def test_every_task_beat_sends_goes_to_a_queue_the_worker_consumes(tmp_path):
    worker = EXPECTED_COMMANDS["worker"]
    consumed = set(worker[worker.index("-Q") + 1].split(","))
    view = _worker_view(tmp_path)
    assert {task: queue for task, queue in view["queues"].items() if queue not in consumed} == {}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)  # the worker is another process on the test database
def test_a_running_worker_says_it_registered_every_task_beat_sends(services_env, tmp_path):  # noqa: F811
    """The worker of the compose file, started with its command line against Redis, asked over the
    broker which tasks it registered (``celery inspect registered``)."""
    from celery import Celery

    env = services_env
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        compose_commands(env)["worker"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    # not the current app: the project's shared tasks would otherwise be sent through this client (to
    # this test's key prefix) by every later test of the run, and their workers would never see them
    client = Celery(
        broker=env["REDIS_URL"],
        broker_transport_options={"global_keyprefix": env["JOINTLINE_REDIS_KEY_PREFIX"]},
        set_as_current=False,
    )
    try:
        answers = wait_for(
            lambda: client.control.inspect(timeout=1.0).registered(), 60, "the worker answered", tmp_path
        )
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        client.close()
    (registered,) = answers.values()
    beat = _worker_view(tmp_path)["schedule"]
    assert {name: task for name, task in beat.items() if task not in registered} == {}
