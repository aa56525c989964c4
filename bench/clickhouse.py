"""ClickHouse against PostgreSQL on the same data: ingest through the store (samples, events and
rollups), the long-window war-room lanes request, the store's reads, bytes on disk, and the schema
choices of docs/decisions/0008-clickhouse-backend.md.

Usage: .venv/bin/python bench/clickhouse.py [--series 120] [--days 14] [--events 200] [--runs 5]
       [--no-schema] [--clickhouse-url http://127.0.0.1:8123/database]

Writes ``series`` noisy gauges and counters at a 15 s scrape over ``days`` days and ``events`` log
lines an hour, one batch per hour of all series (as the journal applies pushes), through
``PostgresStore.write_batch`` (binary COPY, rollup ranges queued, then the queue refreshed as the
task after an apply does) and ``ClickHouseStore.write_batch`` (existence check, RowBinary insert,
rollup buckets recomputed; ClickHouse in-process via chdb, or the server ``--clickhouse-url`` names, whose
database must be empty), and prints samples/s of each, end to end.
Then the war room's lanes request (``build_lanes``: line, rate, band, heatmap and logs lanes) over
the whole window at 1200 px on each, the store's reads of 60 series over the whole window (1200
buckets, value and rate) and the last hour (15 s buckets), median of ``runs``, and bytes on disk per
sample and per event, each with the ClickHouse/PostgreSQL ratio. Without ``--no-schema``, the same
rows raw into variant tables: codecs per column, partitioning, ordering key, FINAL against no FINAL.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_clickhouse"
T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
STEP_US = 15 * S
HOUR_US = 3600 * S
WIDTH = 1200
READ_SERIES = 60
ROW = np.dtype([("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8"), ("value", "<f8")])

CODEC_COLUMNS = {
    "ts_delta_zstd": "Int64 CODEC(Delta(8), ZSTD(1))",
    "ts_doubledelta": "Int64 CODEC(DoubleDelta)",
    "ts_doubledelta_zstd": "Int64 CODEC(DoubleDelta, ZSTD(1))",
    "ts_zstd": "Int64 CODEC(ZSTD(1))",
    "value_zstd": "Float64 CODEC(ZSTD(1))",
    "value_gorilla": "Float64 CODEC(Gorilla)",
    "value_gorilla_zstd": "Float64 CODEC(Gorilla, ZSTD(1))",
    "value_lz4": "Float64 CODEC(LZ4)",
}
LAYOUTS = {
    "month, (org, series, ts)": (
        "PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(ts, 'UTC'))",
        "(org_id, series_id, ts)",
    ),
    "day, (org, series, ts)": ("PARTITION BY intDiv(ts, 86400000000)", "(org_id, series_id, ts)"),
    "none, (org, series, ts)": ("", "(org_id, series_id, ts)"),
    "month, (series, ts)": ("PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(ts, 'UTC'))", "(series_id, ts)"),
}


def series_values(series: int, days: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """(times, values[series, time]): half noisy gauges (3 decimals), half counters with resets."""
    rng = np.random.default_rng(seed)
    ts = T0 + np.arange(days * 86_400 * S // STEP_US, dtype=np.int64) * STEP_US
    values = np.empty((series, len(ts)))
    gauges = series // 2
    walk = np.cumsum(rng.normal(0, 0.5, (gauges, len(ts))), axis=1) + rng.uniform(10, 100, (gauges, 1))
    values[:gauges] = np.round(walk, 3)
    increments = rng.poisson(4e5, (series - gauges, len(ts))).astype(np.float64)
    counters = np.cumsum(increments, axis=1)
    resets = rng.integers(0, len(ts), series - gauges)
    for row, at in enumerate(resets.tolist()):
        counters[row, at:] -= counters[row, at]
    values[gauges:] = counters
    return ts, values


def hour_events(hour_start: int, count: int, nodes: int) -> list:
    """``count`` log lines in the hour from ``hour_start``, spread over ``nodes`` nodes."""
    from core.records import EventRecord

    return [
        EventRecord(
            ts=hour_start + (i * HOUR_US) // max(count, 1),
            signal="application",
            kind="log",
            severity=("info", "warning", "error")[i % 3],
            name="trainer",
            message=f"step {hour_start // HOUR_US * count + i} loss {(i * 7919) % 1000 / 250:.3f}"
            + (" NCCL WARN timeout on rank 12" if i % 97 == 0 else ""),
            resource={"node": f"node-{i % nodes:04d}"},
        )
        for i in range(count)
    ]


def batches(ts: np.ndarray, values: np.ndarray, events_per_hour: int = 0):
    """One Batch per hour of every series (and ``events_per_hour`` log lines)."""
    from core.records import Batch, SeriesBlock

    per_hour = HOUR_US // STEP_US
    for start in range(0, len(ts), per_hour):
        hour_ts = ts[start : start + per_hour].tolist()
        yield Batch(
            source="bench-agent",
            events=hour_events(int(ts[start]), events_per_hour, len(values)),
            series=[
                SeriesBlock(
                    signal="host",
                    metric="bench_gauge" if i < len(values) // 2 else "bench_bytes_total",
                    labels={"node": f"node-{i:04d}"},
                    kind="gauge" if i < len(values) // 2 else "counter",
                    unit="",
                    ts=hour_ts,
                    values=values[i, start : start + per_hour].tolist(),
                )
                for i in range(len(values))
            ],
        )


def write_all(store, org_id: int, ts, values, events_per_hour: int = 0) -> tuple[float, float, int, int]:
    """(seconds writing, seconds refreshing the rollups after, samples stored, events stored)."""
    started = time.perf_counter()
    samples = events = 0
    for batch in batches(ts, values, events_per_hour):
        result = store.write_batch(org_id=org_id, batch=batch)
        samples, events = samples + result.samples_stored, events + result.events_stored
    written = time.perf_counter()
    while store.refresh_stale_rollups():
        pass
    return written - started, time.perf_counter() - written, samples, events


def measure_lanes(scope, backend: str, ts: np.ndarray, runs: int) -> float:
    """Median ms of the war room's lanes request over the whole window at WIDTH px on ``backend``."""
    from django.test.utils import override_settings

    from orgs.read_context import reading
    from timeline.lanes import Grid, LaneSpec, build_lanes

    def request():  # in a read context of its own, as the lanes API opens one for each request
        with reading(scope):
            return build_lanes(scope, specs, grid)

    specs = [
        LaneSpec.parse(text)
        for text in (
            "line:bench/host/bench_gauge",
            "rate:bench/host/bench_bytes_total",
            "band:bench/host/bench_gauge",
            "heatmap:bench/host/bench_gauge",
            "logs:bench/application",
        )
    ]
    grid = Grid(int(ts[0]), int(ts[-1]) + STEP_US, WIDTH)
    with override_settings(JOINTLINE_STORE_BACKEND=backend):
        lanes = request()
        assert all(lane.payload.status == "ok" for lane in lanes), [lane.payload for lane in lanes]
        return _harness.median_ms(request, runs, warm=True)


def measure_reads(store, scope, ids: list[int], ts: np.ndarray, runs: int) -> dict[str, float]:
    from store import ReadHints

    start, end = int(ts[0]), int(ts[-1]) + STEP_US
    long_step = -(-(end - start) // WIDTH)
    reads = {
        "whole window, value": ReadHints(start=start, end=end, step=long_step),
        "whole window, rate": ReadHints(start=start, end=end, step=long_step, fn="rate"),
        "last hour, value": ReadHints(start=end - HOUR_US, end=end, step=STEP_US),
    }
    out = {
        name: _harness.median_ms(lambda h=hints: store.select_buckets(scope, ids, h), runs, warm=True)
        for name, hints in reads.items()
    }
    out["raw samples, last hour"] = _harness.median_ms(
        lambda: store.select_samples(scope, ids, ReadHints(start=end - HOUR_US, end=end)), runs, warm=True
    )
    return out


def raw_rows(ts: np.ndarray, values: np.ndarray, org_id: int, ids: list[int]) -> np.ndarray:
    rows = np.empty(values.size, dtype=ROW)
    rows["org_id"] = org_id
    rows["series_id"] = np.repeat(np.asarray(ids, dtype=np.int64), len(ts))
    rows["ts"] = np.tile(ts, len(ids))
    rows["value"] = values.reshape(-1)
    return rows


def measure_codecs(engine, rows: np.ndarray) -> dict[str, float]:
    """Bytes per sample of each column codec, same rows, merged to one part per partition."""
    columns = ", ".join(f"{name} {kind}" for name, kind in CODEC_COLUMNS.items())
    engine.command("DROP TABLE IF EXISTS bench_codecs")
    engine.command(
        f"""CREATE TABLE bench_codecs (org_id Int64, series_id Int64, ts Int64, {columns})
            ENGINE = MergeTree PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(ts, 'UTC'))
            ORDER BY (org_id, series_id, ts) SETTINGS min_bytes_for_wide_part = 0"""
    )
    wide = np.empty(
        len(rows),
        dtype=[("org_id", "<i8"), ("series_id", "<i8"), ("ts", "<i8")]
        + [(name, "<i8" if name.startswith("ts_") else "<f8") for name in CODEC_COLUMNS],
    )
    for name in ("org_id", "series_id", "ts"):
        wide[name] = rows[name]
    for name in CODEC_COLUMNS:
        wide[name] = rows["ts"] if name.startswith("ts_") else rows["value"]
    engine.insert("bench_codecs", wide.dtype.names, wide.tobytes())
    engine.command("OPTIMIZE TABLE bench_codecs FINAL")
    raw = engine.query(
        """SELECT name, toInt64(data_compressed_bytes) FROM system.columns
           WHERE database = currentDatabase() AND table = 'bench_codecs'"""
    )
    sizes = dict(_name_int_rows(raw))
    engine.command("DROP TABLE bench_codecs")
    return {name: sizes[name] / len(rows) for name in [*CODEC_COLUMNS, "org_id", "series_id"]}


def _name_int_rows(raw: bytes):
    """Decode RowBinary (String, Int64) rows."""
    at = 0
    while at < len(raw):
        length, shift = 0, 0
        while True:
            byte = raw[at]
            at += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        name = raw[at : at + length].decode()
        at += length
        yield name, int.from_bytes(raw[at : at + 8], "little", signed=True)
        at += 8


def measure_layouts(engine, rows: np.ndarray, org_id: int, ids: list[int], ts: np.ndarray, runs: int) -> dict:
    """Per layout: insert rows/s, bytes/sample, and the whole-window value read of 60 series (ms),
    with and without FINAL."""
    start, end = int(ts[0]), int(ts[-1]) + STEP_US
    step = -(-(end - start) // WIDTH)
    out = {}
    for label, (partition, order) in LAYOUTS.items():
        engine.command("DROP TABLE IF EXISTS bench_layout")
        engine.command(
            f"""CREATE TABLE bench_layout (org_id Int64 CODEC(ZSTD(1)), series_id Int64 CODEC(ZSTD(1)),
                    ts Int64 CODEC(Delta(8), ZSTD(1)), value Float64 CODEC(ZSTD(1)))
                ENGINE = ReplacingMergeTree {partition} ORDER BY {order}"""
        )
        data = rows.tobytes()
        started = time.perf_counter()
        engine.insert("bench_layout", ROW.names, data)
        insert_s = time.perf_counter() - started
        engine.command("OPTIMIZE TABLE bench_layout FINAL")
        raw = engine.query(
            """SELECT toInt64(sum(bytes_on_disk)) FROM system.parts
               WHERE database = currentDatabase() AND table = 'bench_layout' AND active"""
        )
        size = int(np.frombuffer(raw, dtype=np.int64)[0])
        times = {}
        for final in ("FINAL", ""):
            # FINAL or nothing: a constant of this loop, not input.
            sql = f"""SELECT toFloat64(series_id), toFloat64(intDiv(ts - {{o:Int64}}, {{s:Int64}})) AS b,
                        min(value), max(value), avg(value), toFloat64(count())
                      FROM bench_layout {final}
                      WHERE org_id IN {{orgs:Array(Int64)}} AND series_id IN {{ids:Array(Int64)}}
                        AND ts >= {{lo:Int64}} AND ts < {{hi:Int64}}
                      GROUP BY series_id, b"""  # noqa: S608
            params = {"o": start, "s": step, "orgs": [org_id], "ids": ids, "lo": start, "hi": end}
            times[final or "no FINAL"] = _harness.median_ms(
                lambda sql=sql, params=params: engine.query(sql, params), runs, warm=True
            )
        out[label] = {
            "insert rows/s": len(rows) / insert_s,
            "bytes/sample": size / len(rows),
            "read ms (FINAL)": times["FINAL"],
            "read ms (no FINAL)": times["no FINAL"],
        }
    engine.command("DROP TABLE IF EXISTS bench_layout")
    return out


def measure_existence_check(store, org_id: int, ids: list[int], ts: np.ndarray, values, runs: int) -> dict:
    """The write path's cost of counting what is new: a re-applied hour (every row there) and a new
    hour (none there), each through write_batch (check + insert) against the check alone."""
    from store.base import SamplePart

    hour = next(iter(batches(ts[-240:], values[:, -240:])))
    parts = [SamplePart(0, ids, hour.series)]
    store._batch_orgs = [org_id]
    rows, _batch = store._rows(parts)
    rows = rows[np.lexsort((rows["ts"], rows["series_id"]))]
    check_ms = _harness.median_ms(lambda: store._stored(rows), runs, warm=True)
    reapply_ms = _harness.median_ms(lambda: store.write_batch(org_id=org_id, batch=hour), runs, warm=True)
    return {
        "rows per batch": len(rows),
        "check ms": check_ms,
        "write_batch of a re-applied hour ms": reapply_ms,
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--series", type=int, default=120)
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--events", type=int, default=200, help="log lines per hour")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-schema", action="store_true", help="skip the codec and layout variants")
    parser.add_argument(
        "--clickhouse-url",
        default="",
        help="a ClickHouse server over HTTP (http://host:8123/database, the database empty) instead of chdb",
    )
    return _harness.parse_with_smoke(parser, series=6, days=1, events=20, runs=1, no_schema=True)


def main() -> None:
    args = parse_args()
    _harness.recreate_database(args.database_url)
    clickhouse_url = args.clickhouse_url or f"chdb://{tempfile.mkdtemp(prefix='jointline-bench-chdb-')}"
    _harness.setup_django(
        args.database_url,
        "clickhouse",
        JOINTLINE_STORE_BACKEND="",  # both stores are built by hand below
        JOINTLINE_CLICKHOUSE_URL=clickhouse_url,
    )
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from orgs.access import Scope
    from orgs.services import organization_create
    from store.clickhouse import ClickHouseStore, engine_for
    from store.postgres import PostgresStore
    from timeline.models import Series

    call_command("migrate", interactive=False, verbosity=0)
    org = organization_create(slug="bench", name="Bench", colour="#4c78a8")[0]
    scope = Scope(viewer_org_id=org.pk, viewer="bench", own_org_ids=frozenset({org.pk}))
    engine = engine_for(settings.JOINTLINE_CLICKHOUSE_URL)
    postgres = PostgresStore(connection)
    clickhouse = ClickHouseStore(connection, relational=PostgresStore(connection), engine=engine)
    clickhouse.create_schema()

    ts, values = series_values(args.series, args.days)
    samples = values.size
    rollups = getattr(settings, "JOINTLINE_ROLLUPS", None)
    print(f"{args.series} series x {len(ts)} points ({args.days} days at 15 s) = {samples:,} samples")
    print(
        f"one batch per hour: {len(ts) // 240} batches of {args.series * 240:,} samples; rollups: {rollups}"
    )

    events = args.events * (len(ts) // 240)
    print(f"{args.events} log lines an hour: {events:,} events")
    print(f"load average at start: {os.getloadavg()[0]:.1f} (figures are of this machine as loaded)")
    pg_write, pg_refresh, pg_stored, pg_events = write_all(postgres, org.pk, ts, values, args.events)
    # the same organisation and series; ClickHouse's tables start empty (its events are not in the
    # Django database's table: it stores every one of them itself, ids from the same sequence)
    ch_write, ch_refresh, ch_stored, ch_events = write_all(clickhouse, org.pk, ts, values, args.events)
    assert pg_stored == ch_stored == samples, (pg_stored, ch_stored, samples)
    assert pg_events == ch_events == events, (pg_events, ch_events, events)
    pg_s, ch_s = pg_write + pg_refresh, ch_write + ch_refresh
    print("\n## ingest through write_batch, end to end (series resolved in PostgreSQL for both)")
    print(f"{'':22} {'write s':>8} {'rollups s':>10} {'samples/s':>12}")
    print(f"{'PostgreSQL (COPY)':22} {pg_write:8.1f} {pg_refresh:10.1f} {samples / pg_s:12,.0f}")
    engine_name = f"ClickHouse ({clickhouse_url.split(':')[0]})"
    print(f"{engine_name:22} {ch_write:8.1f} {ch_refresh:10.1f} {samples / ch_s:12,.0f}")
    print(f"ratio ClickHouse/PostgreSQL samples/s: {pg_s / ch_s:.2f}")

    pg_lanes = measure_lanes(scope, "", ts, args.runs)
    ch_lanes = measure_lanes(scope, "clickhouse", ts, args.runs)
    print(f"\n## lanes request over the whole window ({args.days} days, {WIDTH} px, 5 lanes), median ms")
    print(
        f"PostgreSQL: {pg_lanes:9.1f}   ClickHouse: {ch_lanes:9.1f}   "
        f"ratio ClickHouse/PostgreSQL: {ch_lanes / pg_lanes:.2f}"
    )

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE timeline_sample")
        cursor.execute("VACUUM ANALYZE timeline_event")
    for table in ("timeline_sample", "timeline_event", "timeline_rollup_1m", "timeline_rollup_1h"):
        engine.command(f"OPTIMIZE TABLE {table} FINAL")
    rollup_tables = ["timeline_rollup_1m", "timeline_rollup_5m", "timeline_rollup_30m", "timeline_rollup_1h"]
    pg_sizes, ch_sizes = postgres.table_bytes(rollup_tables), clickhouse.table_bytes(rollup_tables)
    pg_bytes, ch_bytes = pg_sizes["timeline_sample"], ch_sizes["timeline_sample"]
    pg_event_bytes, ch_event_bytes = pg_sizes["timeline_event"], ch_sizes["timeline_event"]
    pg_rollups = sum(pg_sizes[t] or 0 for t in rollup_tables)
    ch_rollups = sum(ch_sizes[t] or 0 for t in rollup_tables)
    print("\n## bytes on disk (PostgreSQL: table + indexes; ClickHouse: merged parts)")
    print(f"{'':22} {'PostgreSQL':>11} {'ClickHouse':>11} {'CH/PG':>7}")
    print(
        f"{'per sample':22} {pg_bytes / samples:11.2f} {ch_bytes / samples:11.2f} {ch_bytes / pg_bytes:7.3f}"
    )
    if events:
        print(
            f"{'per event':22} {pg_event_bytes / events:11.2f} {ch_event_bytes / events:11.2f} "
            f"{ch_event_bytes / pg_event_bytes:7.3f}"
        )
    print(
        f"{'rollups per sample':22} {pg_rollups / samples:11.2f} {ch_rollups / samples:11.2f} "
        f"{ch_rollups / max(pg_rollups, 1):7.3f}"
    )

    ids = sorted(Series.unscoped.filter(org=org).values_list("pk", flat=True))
    chosen = ids[: READ_SERIES // 2] + ids[len(ids) // 2 : len(ids) // 2 + READ_SERIES // 2]
    pg_reads = measure_reads(postgres, scope, chosen, ts, args.runs)
    ch_reads = measure_reads(clickhouse, scope, chosen, ts, args.runs)
    print(f"\n## select_buckets / select_samples of {len(chosen)} series, median of {args.runs} (ms)")
    print(f"{'read':28} {'PostgreSQL':>11} {'ClickHouse':>11} {'CH/PG':>7}")
    for name in pg_reads:
        print(
            f"{name:28} {pg_reads[name]:11.1f} {ch_reads[name]:11.1f} {ch_reads[name] / pg_reads[name]:7.2f}"
        )
    summary = (
        f"clickhouse: ingest {pg_s / ch_s:.2f}x PostgreSQL's samples/s, lanes {ch_lanes / pg_lanes:.2f}x its "
        f"time, {ch_bytes / samples:.2f} bytes per sample (PostgreSQL {pg_bytes / samples:.2f})"
    )
    if args.no_schema:
        print(summary)
        return

    check = measure_existence_check(clickhouse, org.pk, ids, ts, values, args.runs)
    print("\n## the write path's existence check (ClickHouse)")
    for name, figure in check.items():
        print(f"{name:40} {figure:10,.1f}")

    rows = raw_rows(ts, values, org.pk, ids)
    print("\n## codecs: bytes per sample of each column (same rows, merged)")
    for name, figure in measure_codecs(engine, rows).items():
        print(f"{name:22} {figure:6.3f}")
    print(
        f"\n## table layouts: raw insert of all rows at once, the whole-window read of {len(chosen)} series"
    )
    layouts = measure_layouts(engine, rows, org.pk, chosen, ts, args.runs)
    print(f"{'partition, ORDER BY':26} {'rows/s':>12} {'B/sample':>9} {'FINAL ms':>9} {'plain ms':>9}")
    for label, figures in layouts.items():
        print(
            f"{label:26} {figures['insert rows/s']:12,.0f} {figures['bytes/sample']:9.2f} "
            f"{figures['read ms (FINAL)']:9.1f} {figures['read ms (no FINAL)']:9.1f}"
        )
    print(summary)


if __name__ == "__main__":
    main()
