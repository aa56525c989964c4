"""The store is the only place that knows the engine or writes SQL on its tables."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("core", "orgs", "ingest", "timeline", "ops", "config")
STORE = ROOT / "timeline" / "store"
SQL_ON_STORE_TABLES = re.compile(
    r"\b(FROM|INTO|UPDATE|JOIN|TABLE|TRUNCATE)\s+timeline_(sample|event)\b", re.IGNORECASE
)


def _app_modules():
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if STORE in path.parents or "migrations" in path.parts:
                continue
            yield path


def test_no_module_outside_the_store_writes_sql_on_its_tables():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _app_modules()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if SQL_ON_STORE_TABLES.search(line)
    ]
    assert offenders == []


def test_no_module_outside_the_store_tests_the_database_vendor():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _app_modules()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"vendor\s*[!=]=", line)
    ]
    assert offenders == []
