"""``manage.py copy_store --target clickhouse``: an installation's samples and events of a window copied
from PostgreSQL into ClickHouse (chdb), ClickHouse's rollups recomputed, the counts verified; copied
again it adds nothing; a count that differs makes it fail. Runs in the ClickHouse subprocess of
tests/timeline/test_store_clickhouse.py (the Django database is PostgreSQL there, as for a move)."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from core.records import EventRecord, SeriesBlock
from store import ReadHints, get_store
from tests.factories import HOUR, T0, S, log_line, node_gauge, own_scope, write
from timeline.models import Series

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        settings.JOINTLINE_STORE_BACKEND != "clickhouse", reason="runs in the ClickHouse subprocess"
    ),
]

WINDOW = ["--from", "2026-06-15T00:00:00Z", "--to", "2026-06-15T02:00:00Z"]


def gauge(node: str, *, hours: int = 2) -> SeriesBlock:
    return node_gauge([i % 37 for i in range(hours * 240)], node=node)


def event(i: int) -> EventRecord:
    return log_line(
        T0 + i * 97 * S,
        f"XID {i} ünïcode\ttab",
        severity=["info", "error"][i % 2],
        name=f"line-{i}",
        resource={"node": f"node-{i % 3:02d}", "rank": i},
        attributes={"ok": i % 2 == 0},
    )


def on_postgres(org, *, nodes=("node-01", "node-02"), events=50) -> None:
    """What an installation holds before its move: rows in PostgreSQL only, rollups refreshed."""
    postgres = get_store().relational
    series, logged = [gauge(n) for n in nodes], [event(i) for i in range(events)]
    write(org, series=series, events=logged, source="agent", store=postgres)
    while postgres.refresh_stale_rollups():
        pass


def copy(*options: str) -> str:
    out = StringIO()
    call_command("copy_store", "--target", "clickhouse", *WINDOW, "--no-progress", *options, stdout=out)
    return out.getvalue()


def rows_in_clickhouse(table: str, org) -> int:
    """Rows stored, before any merge or FINAL (a second copy would show here)."""
    ids = list(Series.unscoped.filter(org=org).values_list("pk", flat=True))
    if table == "timeline_event":
        query = "SELECT toInt64(count()) FROM {t:Identifier} WHERE org_id = {o:Int64}"
    else:
        query = "SELECT toInt64(count()) FROM {t:Identifier} WHERE series_id IN {s:Array(Int64)}"
    raw = get_store().engine.query(query, {"t": table, "o": org.pk, "s": ids})
    return int(np.frombuffer(raw, dtype=np.int64)[0])


def test_a_copy_moves_samples_events_and_rollups_and_reads_as_postgresql_did(org_a, org_b):
    on_postgres(org_a)
    on_postgres(org_b, nodes=("node-09",), events=5)
    out = copy("--chunk-rows", "100")  # several chunks per series and day
    assert "copied 1440 samples and 55 events new to ClickHouse" in out
    assert "verified: 12 counts of 2 organisations match" in out
    store = get_store()
    assert rows_in_clickhouse("timeline_sample", org_a) == 960
    assert rows_in_clickhouse("timeline_event", org_a) == 50
    assert rows_in_clickhouse("timeline_rollup_1m", org_a) == 2 * 120
    assert rows_in_clickhouse("timeline_rollup_1h", org_a) == 2 * 2
    ids = list(Series.objects.scoped(own_scope(org_a)).values_list("pk", flat=True))
    hints = ReadHints(start=T0, end=T0 + 2 * HOUR, step=5 * 60 * S)
    moved = store.select_buckets(own_scope(org_a), ids, hints).per_series()
    before = store.relational.select_buckets(own_scope(org_a), ids, hints).per_series()
    assert moved == before
    events = ReadHints(start=T0, end=T0 + 2 * HOUR)
    fields = ("pk", "ts", "name", "message", "resource", "attributes", "fingerprint", "source_id")

    def rows(read) -> list[tuple]:
        return [tuple(getattr(event, field) for field in fields) for event in read]

    assert rows(store.select_events(own_scope(org_a), events, order="stored")) == rows(
        store.relational.select_events(own_scope(org_a), events, order="stored")
    )


def test_copying_again_or_a_wider_window_after_a_narrower_one_stores_nothing_twice(org_a):
    on_postgres(org_a)
    first_hour = ["--from", "2026-06-15T00:00:00Z", "--to", "2026-06-15T01:00:00Z"]
    call_command("copy_store", "--target", "clickhouse", *first_hour, "--no-progress", stdout=StringIO())
    assert rows_in_clickhouse("timeline_sample", org_a) == 480
    assert "copied 480 samples and 12 events new" in copy()
    again = copy()
    assert "copied 0 samples and 0 events new to ClickHouse (1010 were there already)" in again
    assert "verified" in again
    assert rows_in_clickhouse("timeline_sample", org_a) == 960
    assert rows_in_clickhouse("timeline_event", org_a) == 50


def test_the_verification_fails_on_a_count_that_differs_and_the_command_exits_non_zero(org_a):
    on_postgres(org_a)
    copy()
    get_store().engine.command(
        "DELETE FROM timeline_event WHERE org_id = {o:Int64} AND ts < {t:Int64}",
        {"o": org_a.pk, "t": T0 + 10 * 97 * S},
    )
    out = StringIO()
    with pytest.raises(
        CommandError, match="1 counts differ: modeldev timeline_event: postgresql 50, clickhouse 40"
    ) as failed:
        call_command("copy_store", "--target", "clickhouse", *WINDOW, "--verify-only", stdout=out)
    assert failed.value.returncode == 1  # what manage.py exits with
    assert "MISMATCH" in out.getvalue()
    repaired = copy()  # copying again inserts what is missing
    assert "copied 0 samples and 10 events new" in repaired and "verified" in repaired


def test_bad_options_are_refused_naming_the_option(org_a):
    with pytest.raises(CommandError, match="--to must be after --from"):
        call_command("copy_store", "--target", "clickhouse", "--from", "2026-06-15T02:00:00Z",
                     "--to", "2026-06-15T01:00:00Z")  # fmt: skip
    with pytest.raises(CommandError, match="--from"):
        call_command("copy_store", "--target", "clickhouse", "--from", "yesterday-ish")
    with pytest.raises(CommandError, match="--org: no organisation nosuch"):
        copy("--org", "nosuch")
    with pytest.raises(CommandError, match="--chunk-rows must be a positive number"):
        copy("--chunk-rows", "0")


def test_a_window_off_the_hour_is_rounded_out_and_said_so(org_a):
    on_postgres(org_a, events=0)
    out = StringIO()
    off_the_hour = ["--from", "2026-06-15T00:10:00Z", "--to", "2026-06-15T00:50:00Z"]
    call_command("copy_store", "--target", "clickhouse", *off_the_hour, "--no-progress", stdout=out)
    assert "window rounded out to whole hours: 2026-06-15T00:00:00" in out.getvalue()
    assert rows_in_clickhouse("timeline_sample", org_a) == 480
