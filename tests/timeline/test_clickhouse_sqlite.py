"""Events in ClickHouse over a SQLite Django database (the embedded case): ids come from SQLite's event
counter, which rolls back with a write; a write that died after its insert leaves rows the next write
deletes and stores again under the same ids, once. Runs in a subprocess of its own (SQLite settings and
a chdb directory of its own; chdb opens one directory per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND == "clickhouse", reason="starts its own process; runs in the default run"
)

SCRIPT = """
import json, django
django.setup()
from django.core.management import call_command
from django.db import transaction
call_command("migrate", interactive=False, verbosity=0)
from core.records import Batch, EventRecord
from orgs.access import Scope
from orgs.services import organization_create
from incidents.selectors import latest_event_us
from timeline.models import Event
from store import ReadHints, get_store

T0 = 1_781_481_600_000_000
org = organization_create(slug="alpha", name="Alpha", colour="#4c78a8")[0]
scope = Scope(viewer_org_id=org.pk, viewer="t", own_org_ids=frozenset({org.pk}))
events = [
    EventRecord(ts=T0 + i, signal="application", kind="log", severity="info", name=f"n{i}", message="m")
    for i in range(5)
]
store = get_store()
out = {"vendor": store.relational.vendor}
with transaction.atomic():
    out["first"] = store.write_batch(org_id=org.pk, batch=Batch(source="s", events=events[:3])).events_stored


class Died(Exception):
    pass


try:
    with transaction.atomic():
        out["died"] = store.write_batch(org_id=org.pk, batch=Batch(source="s", events=events)).events_stored
        raise Died
except Died:
    pass
with transaction.atomic():
    out["again"] = store.write_batch(org_id=org.pk, batch=Batch(source="s", events=events)).events_stored
read = store.select_events(scope, ReadHints(start=0, end=2**62), order="stored")
out["ids"] = [event.pk for event in read]
out["django_rows"] = Event.unscoped.count()
out["latest"] = latest_event_us(scope) - T0
store.engine.command("OPTIMIZE TABLE timeline_event FINAL")
raw = store.engine.query("SELECT toInt64(count()) FROM timeline_event", fmt="TSV")
out["rows"] = int(raw.decode().strip())
print(json.dumps(out))
"""


def test_events_over_sqlite_take_ids_from_its_counter_and_a_died_write_leaves_one_copy(tmp_path):
    pytest.importorskip("chdb", reason="the embedded ClickHouse engine is the clickhouse-embedded extra")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "JOINTLINE_STORE_BACKEND": "clickhouse",
        "JOINTLINE_CLICKHOUSE_URL": f"chdb://{tmp_path / 'clickhouse'}",
        "JOINTLINE_DATA_DIR": str(tmp_path / "data"),
        "JOINTLINE_LOG_LEVEL": "WARNING",
    }
    env.pop("REDIS_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["vendor"] == "sqlite"
    assert (out["first"], out["died"], out["again"]) == (3, 2, 2)  # the dead write's rows went first
    assert out["ids"] == [1, 2, 3, 4, 5]  # the counter rolled back: the same ids, given once
    assert out["django_rows"] == 0 and out["rows"] == 5 and out["latest"] == 4
