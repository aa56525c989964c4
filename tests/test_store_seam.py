"""The store is the only place that knows the engine or writes SQL on its tables."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("core", "orgs", "ingest", "timeline", "ops", "config")
STORE = ROOT / "store"
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


# Modules that use a feature of the Django database's connection itself (not the store of samples and
# events, which may be another engine): each with the reason.
RELATIONAL_FEATURES = {
    "orgs/read_limits.py": "a request's statement_timeout on its own PostgreSQL connection",
    "orgs/label_sql.py": "the RE2 lookup the gate's label matchers compile to, per relational engine",
    "ingest/cardinality.py": "an advisory lock per organisation while its series are counted",
}


def test_no_module_outside_the_store_tests_the_database_vendor():
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _app_modules()
        if str(path.relative_to(ROOT)) not in RELATIONAL_FEATURES
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"vendor\s*[!=]=", line)
    ]
    assert offenders == []


def test_the_relational_feature_list_names_only_modules_that_test_the_vendor():
    for name in RELATIONAL_FEATURES:
        assert re.search(r"vendor\s*[!=]=", (ROOT / name).read_text()), name
