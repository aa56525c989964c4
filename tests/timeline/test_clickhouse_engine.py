"""What the store's ClickHouse engine takes as query parameters reads back the same on both engines:
run in the chdb subprocess of tests/timeline/test_store_clickhouse.py and, through ``HttpEngine``, in
the HTTP one of tests/timeline/test_clickhouse_http.py."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from store import get_store

pytestmark = pytest.mark.skipif(
    settings.JOINTLINE_STORE_BACKEND != "clickhouse", reason="runs in the ClickHouse subprocesses"
)

VALUES = [
    ("String", "tab\t, newline\n, return\r, NUL\0, backslash \\ and \\t spelled, quotes ' ` \""),
    ("String", "ünïcode ☃ 50% OF_ {p0:String}"),
    ("String", ""),
    ("Int64", -(2**63)),
    ("Float64", 0.1),
    ("Nullable(Int64)", None),
    ("Array(Int64)", [1, -2, 2**62]),
    ("Array(Int64)", (3, 4)),
    ("Array(Int64)", []),
    ("Array(String)", ("a'b", "c\\d", "tab\t", "line\n", "")),
]


@pytest.mark.parametrize(("type_", "value"), VALUES, ids=[f"{t}-{i}" for i, (t, _v) in enumerate(VALUES)])
def test_a_parameter_reads_back_as_sent(type_, value):
    raw = get_store().engine.query(f"SELECT {{v:{type_}}}", {"v": value}, fmt="JSONCompactEachRow")
    expected = list(value) if isinstance(value, tuple) else value
    assert json.loads(raw) == [expected]


def test_a_parameter_used_twice_and_in_a_statement_binds_each_time():
    engine = get_store().engine
    engine.command("CREATE TABLE IF NOT EXISTS engine_params (s String) ENGINE = Memory")
    try:
        engine.command(
            "INSERT INTO engine_params SELECT arrayJoin([{a:String}, {a:String}, {b:String}])",
            {"a": "x\ty", "b": "z'"},
        )
        raw = engine.query("SELECT s FROM engine_params ORDER BY s", fmt="JSONCompactEachRow")
        assert [json.loads(line)[0] for line in raw.splitlines()] == ["x\ty", "x\ty", "z'"]
    finally:
        engine.command("DROP TABLE engine_params")
