"""Chunks benchmark: the samples stored as compressed per-series blocks (``store/sample_codec.py``)
beside the store's rows and rollup levels, on the same data in one run: bytes per sample, lane reads per
window, a PromQL-like raw read and writes.

The data is ``bench/peers.py``'s: the reference scenario's ``nfs_rpc_slots_in_use``, one gauge per
node, 63 series over ``--days`` (default 55) at ``--step-s`` (default 60 s). On one database (default
``jointline_bench_chunks``, dropped and recreated):

1. **Load.** The samples go through the store's write path (``write_batch``, 6 h batches, the rollups
   refreshed once after, as ``bench/peers.py`` loads them); then every day is compacted from the rows
   into blocks of ``--block-hours`` (24: a day), one row per series and block ``(series_id, block,
   first_ts, last_ts, n, ts bytea, value bytea)``, ``block`` being ``ts // block length``, in two
   tables: ``STORAGE EXTERNAL`` on the bytea columns (PostgreSQL does not compress them again) and the
   default ``EXTENDED``.
2. **Bytes per sample** on disk (``pg_total_relation_size``, indexes and TOAST included, after VACUUM):
   the row table, the rollup tables, each block table.
3. **Lanes.** Per window (1 h … 55 d ending at the data's end, ``--width`` buckets as a lane request
   draws them, the README's buckets x step), min, max, mean and count per bucket of the 63 series:
   (a) the store's ``select_buckets`` as a lane request calls it (raw rows or a rollup level, as its
   plan chooses), (b) from blocks: one binary SELECT of the overlapping blocks, decoded, the buckets'
   statistics by numpy (``np.minimum.reduceat`` … over the cuts ``np.searchsorted`` finds). Both are
   checked to agree bucket for bucket, then timed in ``--rounds`` interleaved rounds (medians).
4. **Raw read.** 24 h of ``--raw-series`` (60) series at 15 s (another organisation, 345,600 samples) as
   arrays per series: the store's ``select_sample_arrays`` (its sample cache off) against blocks.
5. **Writes** of a ``--write-samples`` backfill (2 M, whole days of the same series under new labels):
   encoding into blocks and COPY, against the store's ``write_batch`` into rows plus the rollup refresh,
   and a raw binary COPY of the same rows into ``timeline_sample``.

The last line is ``chunks: X bytes/sample (rows Y) | 24 h A ms vs B ms rows | 7 d … | 55 d … | raw 24 h
read C ms vs D ms``. Needs PostgreSQL (trust auth) on 127.0.0.1. From the project root::

    .venv/bin/python bench/chunks.py                 # 55 days at 60 s (~5.0 M samples)
    .venv/bin/python bench/chunks.py --block-hours 1  # hour blocks
    .venv/bin/python bench/chunks.py --smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import psycopg

ROOT = Path(__file__).resolve().parents[1]
# Run as `python bench/chunks.py`, this file's folder comes first on sys.path, where bench/timeline.py
# would shadow the project's `timeline` package: put the project root there instead.
sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench")]

from bench import _harness  # noqa: E402
from bench import peer_prometheus as prom  # noqa: E402
from bench.peers import WINDOWS, load_average, make_case  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/jointline_bench_chunks"
DAY_US = 86_400_000_000
BLOCK_TABLES = ("chunk_block_external", "chunk_block_extended")
SHOWN = ("24 h", "7 d", "55 d")


@dataclass
class Data:
    org_id: int
    series_ids: list[int]
    samples: int
    start_us: int
    end_us: int


# --------------------------------------------------------------------------- loading


def write_case(args: argparse.Namespace, step_s: int, days: int, org_slug: str, labels: dict) -> Data:
    """The peers' series (``days`` at ``step_s``) through the store's ``write_batch`` into a fresh
    organisation, with ``labels`` added; rollups queued, refreshed by the caller."""
    from core.records import Batch
    from orgs.services import organization_create
    from store import get_store
    from timeline.models import Series

    case = make_case(argparse.Namespace(days=days, step_s=step_s))
    org = organization_create(slug=org_slug, name=org_slug)[0]
    store, samples = get_store(), 0
    for _, batch in prom.metric_batches(case):
        blocks = [msgspec.structs.replace(b, labels={**b.labels, **labels}) for b in batch.series]
        store.write_batch(org_id=org.pk, batch=Batch(source="bench", series=blocks))
        samples += batch.sample_count
    ids = sorted(Series.unscoped.filter(org=org, metric=prom.METRIC).values_list("pk", flat=True))
    return Data(org.pk, ids, samples, case.config.start_us, case.config.end_us)


def refresh_rollups() -> float:
    from django.core.management import call_command

    started = time.perf_counter()
    call_command("refresh_rollups", "--no-progress", stdout=sys.stderr)
    return time.perf_counter() - started


def create_block_tables() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        for table in (*BLOCK_TABLES, "chunk_block_write"):
            cursor.execute(
                f"""CREATE TABLE {table} (series_id int, block int, first_ts bigint, last_ts bigint, n int,
                    ts bytea, value bytea, PRIMARY KEY (series_id, block))"""
            )
            if table != "chunk_block_extended":
                cursor.execute(
                    f"ALTER TABLE {table} ALTER COLUMN ts SET STORAGE EXTERNAL, "
                    "ALTER COLUMN value SET STORAGE EXTERNAL"
                )


def day_rows(series_ids: list[int], day: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """One day's samples of ``series_ids`` from the row table, per series, sorted by time."""
    from django.db import connection

    from store.frames import SAMPLE_ROW, samples_by_series

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT series_id, ts, value FROM timeline_sample WHERE series_id = ANY(%s) AND ts >= %s "
            "AND ts < %s ORDER BY series_id, ts",
            [series_ids, day * DAY_US, (day + 1) * DAY_US],
        )
        rows = cursor.fetchall()
    return samples_by_series(np.fromiter(rows, dtype=SAMPLE_ROW, count=len(rows)))


def write_blocks(table: str, arrays: dict[int, tuple[np.ndarray, np.ndarray]], block_us: int) -> None:
    """One day's samples as blocks of ``block_us`` (numbered ``ts // block_us``), encoded and COPYed
    (binary) into ``table``."""
    from django.db import connection

    from store.sample_codec import encode_block

    connection.ensure_connection()
    sql = f"COPY {table} FROM STDIN (FORMAT BINARY)"
    with connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
        copy.set_types(["int4", "int4", "int8", "int8", "int4", "bytea", "bytea"])
        for series_id, (ts, values) in arrays.items():
            numbers = ts // block_us
            cuts = np.flatnonzero(np.diff(numbers)) + 1
            for part_ts, part_values in zip(np.split(ts, cuts), np.split(values, cuts), strict=True):
                times, encoded = encode_block(part_ts, part_values)
                row = (int(part_ts[0] // block_us), int(part_ts[0]), int(part_ts[-1]), len(part_ts))
                copy.write_row((series_id, *row, times, encoded))
    connection.connection.commit()


def compact(data: Data, tables: tuple[str, ...], block_us: int) -> float:
    """Every day of ``data`` from rows into blocks in each of ``tables``; returns samples/s of the
    compaction into the first (read, encode, write)."""
    spent = 0.0
    for day in range(data.start_us // DAY_US, -(-data.end_us // DAY_US)):
        started = time.perf_counter()
        arrays = day_rows(data.series_ids, day)
        write_blocks(tables[0], arrays, block_us)
        spent += time.perf_counter() - started
        for table in tables[1:]:
            write_blocks(table, arrays, block_us)
    return data.samples / spent


def vacuum() -> None:
    from django.db import connection

    connection.ensure_connection()
    autocommit = connection.connection.autocommit
    connection.connection.autocommit = True
    try:
        connection.connection.execute("VACUUM ANALYZE")
    finally:
        connection.connection.autocommit = autocommit


def total_bytes(table: str) -> int:
    """``table`` with its indexes and TOAST, and its partitions' when it has them."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT COALESCE((SELECT SUM(pg_total_relation_size(relid)) FROM pg_partition_tree(%s)
               WHERE isleaf), pg_total_relation_size(%s))""",
            [table, table],
        )
        return int(cursor.fetchone()[0])


# --------------------------------------------------------------------------- reads


def store_buckets(ids: list[int], start: int, end: int, step: int):
    from orgs.access import Scope
    from store import get_store
    from store.hints import ReadHints

    return get_store().select_buckets(Scope.system(), ids, ReadHints(start=start, end=end, step=step))


def read_blocks(
    table: str, ids: list[int], lo: int, hi: int, block_us: int
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The samples of ``ids`` in ``[lo, hi)`` from one binary SELECT of the blocks that overlap it: per
    series, its blocks decoded one by one (in time order) and cut to the window."""
    from django.db import connection

    from orgs.access import Scope
    from store import get_store
    from store.sample_codec import decode_block

    readable = sorted(get_store().readable_series(Scope.system(), ids))  # as a request checks its scope
    connection.ensure_connection()
    # Django's cursors bind parameters on the client, which allows no binary results: a server-side one
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f"""SELECT series_id, ts, value FROM {table} WHERE series_id = ANY(%s)
                AND block >= %s AND block <= %s AND last_ts >= %s AND first_ts < %s
                ORDER BY series_id, block""",  # noqa: S608
            [readable, lo // block_us, (hi - 1) // block_us, lo, hi],
            binary=True,
        )
        rows = cursor.fetchall()
    parts: dict[int, list] = {}
    for series_id, times, values in rows:
        parts.setdefault(series_id, []).append(decode_block(times, values))
    out = {}
    for series_id, blocks in parts.items():
        ts = blocks[0][0] if len(blocks) == 1 else np.concatenate([b[0] for b in blocks])
        values = blocks[0][1] if len(blocks) == 1 else np.concatenate([b[1] for b in blocks])
        first, last = np.searchsorted(ts, [lo, hi])
        if last > first:
            out[series_id] = (ts[first:last], values[first:last])
    return out


def block_buckets(table: str, ids: list[int], start: int, end: int, step: int, block_us: int) -> np.ndarray:
    """:func:`store_buckets`'s rows (series, bucket, min, max, mean, count) from blocks."""
    arrays = read_blocks(table, ids, start, end, block_us)
    parts = []
    for series_id, (ts, values) in arrays.items():
        edges = start + step * np.arange(-(-(end - start) // step) + 1, dtype=np.int64)
        cuts = np.searchsorted(ts, edges)
        filled = np.flatnonzero(cuts[1:] > cuts[:-1])
        at = cuts[filled]
        counts = cuts[filled + 1] - at
        rows = np.empty((len(filled), 6))
        rows[:, 0], rows[:, 1] = series_id, filled
        rows[:, 2] = np.minimum.reduceat(values, at)
        rows[:, 3] = np.maximum.reduceat(values, at)
        rows[:, 4] = np.add.reduceat(values, at) / counts
        rows[:, 5] = counts
        parts.append(rows)
    return np.concatenate(parts) if parts else np.empty((0, 6))


def same_buckets(frame, rows: np.ndarray) -> str:
    """'' when the store's frame and the blocks' rows hold the same buckets, else what differs."""
    theirs = np.column_stack([frame[name] for name in ("series_id", "bucket", "min", "max", "mean", "count")])
    theirs = theirs[np.lexsort((theirs[:, 1], theirs[:, 0]))]
    ours = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    if theirs.shape != ours.shape:
        return f"{len(theirs)} buckets from the store, {len(ours)} from blocks"
    if not np.array_equal(theirs[:, [0, 1, 2, 3, 5]], ours[:, [0, 1, 2, 3, 5]]):
        return "min, max or count differ"
    if not np.allclose(theirs[:, 4], ours[:, 4], rtol=1e-9, atol=0):
        return "means differ"
    return ""


def interleaved(sides: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median ms per side over ``rounds`` rounds, the order turning each round (after one warm call)."""
    for call in sides.values():
        call()
    names, times = list(sides), {name: [] for name in sides}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            sides[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(spent) for name, spent in times.items()}


def measure_windows(data: Data, width: int, rounds: int, block_us: int) -> dict[str, dict]:
    from timeline.lanes.grid import Grid

    results = {}
    for name, span in WINDOWS.items():
        if span > data.end_us - data.start_us:
            continue
        grid = Grid(data.end_us - span, data.end_us, width)
        start, end, step = grid.start, grid.end, grid.step(1)
        frame = store_buckets(data.series_ids, start, end, step)
        for table in BLOCK_TABLES:
            problem = same_buckets(frame, block_buckets(table, data.series_ids, start, end, step, block_us))
            if problem:
                raise _harness.HarnessError(f"{name}: blocks of {table} and rows disagree: {problem}")
        sides = {"rows": lambda s=start, e=end, t=step: store_buckets(data.series_ids, s, e, t)}
        for table in BLOCK_TABLES:
            sides[table] = lambda tb=table, s=start, e=end, t=step: block_buckets(
                tb, data.series_ids, s, e, t, block_us
            )
        results[name] = {
            "grid": f"{grid.buckets(step)} x {step // 1_000_000:,} s",
            **interleaved(sides, rounds),
        }
        print(f"  {name}: {results[name]['grid']}, buckets agree", file=sys.stderr, flush=True)
    return results


def measure_raw(data: Data, rounds: int, block_us: int) -> dict[str, float]:
    from orgs.access import Scope
    from store import get_store
    from store.hints import ReadHints

    start, end = data.end_us - DAY_US, data.end_us
    hints = ReadHints(start=start, end=end)
    rows = get_store().select_sample_arrays(Scope.system(), data.series_ids, hints)
    blocks = read_blocks(BLOCK_TABLES[0], data.series_ids, start, end, block_us)
    if rows.keys() != blocks.keys() or any(
        not (np.array_equal(rows[s][0], blocks[s][0]) and np.array_equal(rows[s][1], blocks[s][1]))
        for s in rows
    ):
        raise _harness.HarnessError("raw read: blocks and rows hold other samples")
    print(
        f"  raw read: {sum(len(t) for t, _ in rows.values()):,} samples, the same both ways", file=sys.stderr
    )
    return interleaved(
        {
            "rows": lambda: get_store().select_sample_arrays(Scope.system(), data.series_ids, hints),
            "blocks": lambda: read_blocks(BLOCK_TABLES[0], data.series_ids, start, end, block_us),
        },
        rounds,
    )


# --------------------------------------------------------------------------- writes

COPY_ROW = np.dtype(
    [("fields", ">i2"), ("len_id", ">i4"), ("series_id", ">i8"), ("len_ts", ">i4"), ("ts", ">i8"),
     ("len_value", ">i4"), ("value", ">f8")]
)  # fmt: skip
RAW_ID_BASE = 1_000_000_000  # series ids of the raw COPY: nothing else has them


def checkpoint() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")


def copy_rows(day_arrays: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
    """One day's samples as one binary COPY into ``timeline_sample`` (numpy-built, as the store's own)."""
    from django.db import connection

    lengths = [len(ts) for ts, _ in day_arrays.values()]
    rows = np.empty(sum(lengths), dtype=COPY_ROW)
    rows["fields"], rows["len_id"], rows["len_ts"], rows["len_value"] = 3, 8, 8, 8
    rows["series_id"] = np.repeat(RAW_ID_BASE + np.fromiter(day_arrays, dtype=np.int64), lengths)
    rows["ts"] = np.concatenate([ts for ts, _ in day_arrays.values()])
    rows["value"] = np.concatenate([values for _, values in day_arrays.values()])
    connection.ensure_connection()
    sql = "COPY timeline_sample (series_id, ts, value) FROM STDIN (FORMAT BINARY)"
    with connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + bytes(8) + rows.tobytes() + b"\xff\xff")
    connection.connection.commit()


def store_batches(data: Data, arrays: dict[int, dict]) -> list:
    """Each day's samples as a batch of the store's write path, under labels no series has yet."""
    from core.records import Batch, SeriesBlock
    from timeline.models import Series

    series = {s.pk: s for s in Series.unscoped.filter(pk__in=data.series_ids)}
    batches = []
    for day_arrays in arrays.values():
        blocks = [
            SeriesBlock(
                signal=series[sid].signal,
                metric=series[sid].metric,
                labels={**series[sid].labels, "copy": "backfill"},
                kind=series[sid].kind,
                unit=series[sid].unit,
                ts=ts.tolist(),
                values=values.tolist(),
            )
            for sid, (ts, values) in day_arrays.items()
        ]
        batches.append(Batch(source="bench", series=blocks))
    return batches


def measure_writes(data: Data, wanted: int, block_us: int) -> dict[str, float]:
    """Samples/s of writing whole days (at least ``wanted`` samples, first days first) three ways."""
    from store import get_store

    first = data.start_us // DAY_US
    arrays: dict[int, dict] = {}
    samples = 0
    while samples < wanted and first + len(arrays) < -(-data.end_us // DAY_US):
        day = first + len(arrays)
        arrays[day] = day_rows(data.series_ids, day)
        samples += sum(len(ts) for ts, _ in arrays[day].values())
    batches = store_batches(data, arrays)
    store = get_store()
    spent = {}
    checkpoint()
    started = time.perf_counter()
    for day_arrays in arrays.values():
        write_blocks("chunk_block_write", day_arrays, block_us)
    spent["blocks (encode + COPY)"] = time.perf_counter() - started
    checkpoint()
    started = time.perf_counter()
    for day_arrays in arrays.values():
        copy_rows(day_arrays)
    spent["rows: raw COPY"] = time.perf_counter() - started
    checkpoint()
    started = time.perf_counter()
    for batch in batches:
        store.write_batch(org_id=data.org_id, batch=batch)
    spent["rows: write_batch"] = time.perf_counter() - started
    while store.refresh_stale_rollups(limit=20_000):
        pass
    spent["rows: write_batch + rollups"] = time.perf_counter() - started
    print(f"  writes: {samples:,} samples, {len(arrays)} days", file=sys.stderr)
    return {"samples": samples, **{name: samples / seconds for name, seconds in spent.items()}}


# --------------------------------------------------------------------------- running it


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="dropped and recreated")
    parser.add_argument("--days", type=int, default=55, help="days of data; windows longer are left out")
    parser.add_argument("--step-s", type=int, default=60, help="scrape step")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timed rounds")
    parser.add_argument("--width", type=int, default=1200, help="buckets per series")
    parser.add_argument("--raw-series", type=int, default=60, help="series of the raw 24 h read at 15 s")
    parser.add_argument("--write-samples", type=int, default=2_000_000, help="samples of the write test")
    parser.add_argument(
        "--block-hours", type=int, default=24, choices=(1, 2, 3, 4, 6, 8, 12, 24), help="hours a block spans"
    )
    args = _harness.parse_with_smoke(parser, days=1, rounds=1, width=100, raw_series=4, write_samples=20_000)
    if args.rounds < 1 or args.width < 10 or args.days < 1 or args.step_s < 1 or args.raw_series < 1:
        parser.error("--rounds >= 1, --width >= 10, --days >= 1, --step-s >= 1, --raw-series >= 1")
    return args


def report(
    data: Data, sizes: dict[str, int], windows: dict, raw: dict, writes: dict, loads: tuple, hours: int
) -> str:
    per_sample = {name: size / data.samples for name, size in sizes.items()}
    print(
        f"\n{data.samples:,} samples, {len(data.series_ids)} series, blocks of {hours} h; "
        f"load average {loads[0]} -> {loads[1]}"
    )
    print("bytes per sample on disk (with indexes and TOAST):")
    for name, value in per_sample.items():
        print(f"  {name:<28} {value:7.2f}  ({sizes[name] / 2**20:,.1f} MiB)")
    print("| window | buckets x step | rows (store) ms | blocks ms | blocks, EXTENDED ms | blocks / rows |")
    print("|---|---|---|---|---|---|")
    for name, row in windows.items():
        ours, theirs = row[BLOCK_TABLES[0]], row["rows"]
        print(
            f"| {name} | {row['grid']} | {theirs:.1f} | {ours:.1f} | {row[BLOCK_TABLES[1]]:.1f} | "
            f"{ours / theirs:.2f}x |"
        )
    print(f"raw read, 24 h at 15 s as arrays: rows {raw['rows']:.1f} ms, blocks {raw['blocks']:.1f} ms")
    print(f"writes of {writes['samples']:,} samples (samples/s):")
    for name, rate in writes.items():
        if name != "samples":
            print(f"  {name:<28} {rate:12,.0f}")
    parts = [f"chunks: {per_sample['blocks (EXTERNAL)']:.2f} bytes/sample (rows {per_sample['rows']:.2f})"]
    for name in [n for n in SHOWN if n in windows] or list(windows)[-1:]:
        parts.append(f"{name} {windows[name][BLOCK_TABLES[0]]:.0f} ms vs {windows[name]['rows']:.0f} ms rows")
    parts.append(f"raw 24 h read {raw['blocks']:.0f} ms vs {raw['rows']:.0f} ms")
    return " | ".join(parts)


def main() -> None:
    args = parse_args()
    _harness.require_loopback(args.database_url)
    print(f"setting up {_harness.database_name(args.database_url)} …", file=sys.stderr)
    _harness.recreate_database(args.database_url)
    _harness.setup_django(args.database_url, "chunks", JOINTLINE_SAMPLE_CACHE_MB="0")
    from django.core.management import call_command

    from store import rollups
    from store.tasks import rollup_refresh_deferred

    call_command("migrate", interactive=False, verbosity=0)
    started = time.perf_counter()
    with rollup_refresh_deferred():
        data = write_case(args, args.step_s, args.days, "storage", {})
    loaded_s = time.perf_counter() - started
    refreshed_s = refresh_rollups()
    create_block_tables()
    block_us = args.block_hours * DAY_US // 24
    compact_rate = compact(data, BLOCK_TABLES, block_us)
    print(
        f"  {data.samples:,} samples written in {loaded_s:.0f} s, rollups refreshed in {refreshed_s:.0f} s, "
        f"compacted into blocks at {compact_rate:,.0f} samples/s",
        file=sys.stderr,
    )
    vacuum()
    sizes = {"rows": total_bytes("timeline_sample")}
    for _, table in rollups.ROLLUPS:
        sizes[f"rollup {table.rsplit('_', 1)[1]}"] = total_bytes(table)
    sizes["rollups (all levels)"] = sum(total_bytes(table) for _, table in rollups.ROLLUPS)
    sizes["blocks (EXTERNAL)"] = total_bytes(BLOCK_TABLES[0])
    sizes["blocks (EXTENDED)"] = total_bytes(BLOCK_TABLES[1])
    before = load_average()
    windows = measure_windows(data, args.width, args.rounds, block_us)
    with rollup_refresh_deferred():
        raw = write_case(args, 15, 1, "raw-read", {})
    refresh_rollups()
    raw.series_ids = raw.series_ids[: args.raw_series]
    compact(raw, BLOCK_TABLES[:1], block_us)
    _harness.analyze()
    raw_times = measure_raw(raw, args.rounds, block_us)
    writes = measure_writes(data, args.write_samples, block_us)
    print(report(data, sizes, windows, raw_times, writes, (before, load_average()), args.block_hours))


if __name__ == "__main__":
    os.environ.setdefault("JOINTLINE_SAMPLE_CACHE_MB", "0")
    main()
