"""An upgrade from the last release's schema, with data in it, to this code's: nothing lost.

The release before the read side was split into one app per sub-domain (``RELEASE``, schema up to
``timeline`` 0011, rollups at one minute and one hour) is checked out from the repository's history
into a scratch directory. Its own ``manage.py migrate`` creates a fresh PostgreSQL database, and its
own code writes two organisations, a grant, a user, an incident with an annotation and a permalink,
gauges and a counter over three hours, and events, then refreshes its rollups. This checkout's
``manage.py migrate`` then upgrades that database, and the test compares, table by table, what the
old code wrote with what is there after (row counts and value sums of every table it wrote), checks
that the new rollup levels (5 and 30 minutes) were derived from the minute rows, and reads the
other organisation's granted series through this code's store and gate.

A shallow clone without ``RELEASE`` in its history cannot run it: the test then says so and skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.settings import SERVICES_AVAILABLE, SERVICES_PROBLEM, TEST_DATABASE_URL

ROOT = Path(__file__).resolve().parents[1]
RELEASE = "61322e54e01382a6a7a9b63c1d423624781e0393"

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(not SERVICES_AVAILABLE, reason=f"needs PostgreSQL and Redis: {SERVICES_PROBLEM}"),
]

# Written by the release's code, in its checkout.
SEED = r"""
import json
import django

django.setup()
from django.contrib.auth import get_user_model

from core.records import Batch, EventRecord, SeriesBlock
from orgs.models import Level
from orgs.services import grant_create, organization_create
from timeline.store import get_store

S = 1_000_000
T0 = 1_781_481_600 * S  # 2026-06-15T00:00:00Z
owner, _ = organization_create(slug="storage", name="Storage team", colour="#4c78a8")
viewer, _ = organization_create(slug="modeldev", name="Model developer", colour="#e45756")
grant_create(owner=owner, grantee=viewer, name="metrics", level=Level.FULL, signals=["storage"])
steps = range(0, 3 * 3600, 15)
blocks = [
    SeriesBlock("storage", "read_bytes", {"node": f"n{i}"}, "gauge", "By", [T0 + k * S for k in steps],
                [float((k // 15 + 7 * i) % 97) for k in steps])
    for i in range(3)
] + [
    SeriesBlock("storage", "ops_total", {"node": "n0"}, "counter", "1", [T0 + k * S for k in steps],
                [float(k // 15 * 3 if k < 5400 else (k - 5400) // 15) for k in steps])
]
events = [
    EventRecord(T0 + m * 60 * S, "storage", "log", "error" if m % 10 == 0 else "info", "slow_shard",
                f"shard {m} slow <b>", resource={"node": f"n{m % 3}"})
    for m in range(0, 180, 3)
]
store = get_store()
store.write_batch(org_id=owner.pk, batch=Batch(source="seed", series=blocks, events=events))
while store.refresh_stale_rollups(limit=10_000):
    pass
print(json.dumps({"owner": owner.pk, "viewer": viewer.pk}))
"""

# Read by this checkout's code after the upgrade, through the store and the gate.
READ = r"""
import json
import sys
import django

django.setup()
from orgs.access import Scope
from orgs.models import Organization
from store import get_store
from store.hints import ReadHints
from timeline.models import Series

S = 1_000_000
T0 = 1_781_481_600 * S
viewer = Organization.objects.get(slug="modeldev")
scope = Scope.dangerously_as_org(viewer.pk, "upgrade")
ids = sorted(Series.objects.scoped(scope).values_list("pk", flat=True))
frame = get_store().select_buckets(scope, ids, ReadHints(start=T0, end=T0 + 3 * 3600 * S, step=300 * S))
print(json.dumps({"series": len(ids), "count": float(frame["count"].sum()), "rows": len(frame)}))
"""

OLD_TABLES = (
    "orgs_organization",
    "orgs_grant",
    "timeline_series",
    "timeline_sample",
    "timeline_event",
    "timeline_rollup_1m",
    "timeline_rollup_1h",
    "timeline_incident",
    "timeline_annotation",
    "timeline_permalink",
)


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.fixture
def release(tmp_path) -> Path:
    if _git("cat-file", "-e", f"{RELEASE}^{{commit}}").returncode != 0:
        pytest.skip(f"the release {RELEASE[:7]} is not in this clone's history (a shallow clone)")
    target = tmp_path / "release"
    archive = subprocess.run(["git", "archive", RELEASE], cwd=ROOT, capture_output=True, check=True)
    target.mkdir()
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


@pytest.fixture
def database() -> str:
    server = TEST_DATABASE_URL.rsplit("/", 1)[0]
    name = f"jl_upgrade_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{server}/{name}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _run(cwd: Path, url: str, data_dir: Path, *args: str) -> str:
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "JOINTLINE_DATA_DIR": str(data_dir),
        "PYTHONPATH": str(cwd),
    }
    env.pop("REDIS_URL", None)  # eager Celery, local-memory cache: the upgrade needs neither
    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)} in {cwd}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def _fingerprint(url: str) -> dict:
    """Rows and value sums of every table the release wrote."""
    out = {}
    with psycopg.connect(url) as conn:
        for table in OLD_TABLES:
            out[table] = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            ).fetchone()[0]
        out["sample_sum"] = conn.execute("SELECT sum(value) FROM timeline_sample").fetchone()[0]
        out["event_messages"] = conn.execute(
            "SELECT md5(string_agg(message, '|' ORDER BY ts, id)) FROM timeline_event"
        ).fetchone()[0]
        for table in ("timeline_rollup_1m", "timeline_rollup_1h"):
            out[f"{table}_n"], out[f"{table}_total"], out[f"{table}_increase"] = conn.execute(
                sql.SQL(
                    "SELECT sum(n), round(sum(total)::numeric, 6), round(sum(increase)::numeric, 6) FROM {}"
                ).format(sql.Identifier(table))
            ).fetchone()
        out["grants"] = conn.execute(
            "SELECT string_agg(level || ':' || name, ',') FROM orgs_grant"
        ).fetchone()[0]
    return {key: str(value) for key, value in out.items()}


@pytest.mark.django_db(transaction=True)
def test_a_release_database_with_data_upgrades_with_nothing_lost(release, database, tmp_path):
    old_data, new_data = tmp_path / "old-data", tmp_path / "new-data"
    old_data.mkdir()
    new_data.mkdir()
    _run(release, database, old_data, "manage.py", "migrate", "--no-input", "-v", "0")
    orgs = json.loads(_run(release, database, old_data, "-c", SEED).strip().splitlines()[-1])
    with psycopg.connect(database) as conn:
        user = conn.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
            " is_active, date_joined) VALUES ('!', false, 'ana', '', '', '', false, true, now()) RETURNING id"
        ).fetchone()[0]
    seeded = _run(
        release,
        database,
        old_data,
        "-c",
        "import django; django.setup()\n"
        "from django.contrib.auth import get_user_model\n"
        "from orgs.models import Membership, Organization\n"
        "from timeline.services import annotation_create, incident_create, permalink_create\n"
        f"user = get_user_model().objects.get(pk={user})\n"
        f"org = Organization.objects.get(pk={orgs['viewer']})\n"
        "Membership.objects.create(user=user, org=org, role='admin')\n"
        "incident = incident_create(user=user, title='Slow reads <i>', window_start=1_781_481_600_000_000,"
        " window_end=1_781_492_400_000_000)\n"
        "annotation_create(user=user, incident=incident, ts=1_781_485_200_000_000, text='shard 20 slow')\n"
        "permalink_create(user=user, state={'from': '2026-06-15T00:00:00Z', 'to': '2026-06-15T03:00:00Z'},"
        " incident=incident)\n"
        "print('ok')\n",
    )
    assert seeded.strip().endswith("ok")
    before = _fingerprint(database)
    assert int(before["timeline_sample"]) == 4 * 720 and int(before["timeline_rollup_1m"]) == 4 * 180
    assert int(before["timeline_incident"]) == int(before["timeline_permalink"]) == 1

    _run(ROOT, database, new_data, "manage.py", "migrate", "--no-input", "-v", "0")
    assert _fingerprint(database) == before
    with psycopg.connect(database) as conn:
        for table, buckets in (("timeline_rollup_5m", 36), ("timeline_rollup_30m", 6)):
            rows, n = conn.execute(
                sql.SQL("SELECT count(*), sum(n) FROM {}").format(sql.Identifier(table))
            ).fetchone()
            assert rows == 4 * buckets and int(n) == 4 * 720, table
    plan = _run(ROOT, database, new_data, "manage.py", "migrate", "--plan")
    assert "No planned migration operations" in plan
    read = json.loads(_run(ROOT, database, new_data, "-c", READ).strip().splitlines()[-1])
    assert read == {"series": 4, "count": 4 * 720.0, "rows": 4 * 36}


def test_the_release_is_older_than_every_migration_it_is_upgraded_over():
    """The test above means something only while the release predates a migration of this code."""
    if _git("cat-file", "-e", f"{RELEASE}^{{commit}}").returncode != 0:
        pytest.skip(f"the release {RELEASE[:7]} is not in this clone's history (a shallow clone)")
    listed = [
        path
        for path in _git("ls-tree", "-r", "--name-only", RELEASE, "timeline/migrations/").stdout.split()
        if Path(path).name.startswith("0")
    ]
    now = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "timeline" / "migrations").glob("0*.py"))
    assert set(listed) < set(now)
    assert shutil.which("tar") is not None


def test_the_timeline_migrations_go_back_to_the_first_rollup_levels_and_forward_again(database, tmp_path):
    """Taking the rollup levels back (timeline 0012's reverse) runs after the rollup chunks' reverse
    (0017) dropped their table: it must not need it."""
    _run(ROOT, database, tmp_path, "manage.py", "migrate", "--no-input", "-v", "0")
    _run(ROOT, database, tmp_path, "manage.py", "migrate", "timeline", "0011", "--no-input", "-v", "0")
    _run(ROOT, database, tmp_path, "manage.py", "migrate", "--no-input", "-v", "0")
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT to_regclass('timeline_rollup_chunk') IS NOT NULL").fetchone() == (True,)
