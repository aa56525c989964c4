"""Event counts: events counted per (organisation, source, signal, kind, name, severity) and bucket
of 1 min and 1 h, with how many of them have a duration, so a lane or the analysis counts rows instead
of raw events.

A count row is a pure function of the raw events in its bucket: a write queues the minute ranges it
touched per organisation (:data:`EVENT_DIRTY`, in its own transaction), and the refresh recomputes
every count row of those ranges (whole hours for the hour table) from the raw events, under the
refresh lock. A re-applied batch stores no event twice, so it counts none twice; a late event is in
its bucket's recount.
"""

from __future__ import annotations

from store.rollup_levels import HOUR_US, MINUTE_US

EVENT_ROLLUPS: tuple[tuple[int, str], ...] = (
    (HOUR_US, "timeline_event_rollup_1h"),
    (MINUTE_US, "timeline_event_rollup_1m"),
)
"""(bucket width µs, table) of the event counts, coarsest first."""
EVENT_DIRTY = "timeline_event_rollup_stale"  # (org id, lo, hi) minute ranges of events not counted yet
EVENT_KEY = "org_id, source_id, signal, kind, name, severity"


def event_schema(table: str) -> list[str]:
    """The statements creating one event count table (no primary key: a source may be NULL, and
    the refresh replaces whole ranges of an organisation's rows, never one row)."""
    return [
        f"""CREATE TABLE IF NOT EXISTS {table} (
            org_id BIGINT NOT NULL,
            source_id BIGINT,
            signal VARCHAR(16) NOT NULL,
            kind VARCHAR(8) NOT NULL,
            name VARCHAR(200) NOT NULL,
            severity VARCHAR(10) NOT NULL,
            bucket BIGINT NOT NULL,
            n BIGINT NOT NULL,
            spans BIGINT NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS {table}_org_bucket ON {table} (org_id, signal, bucket)",
    ]


def event_refresh_sql(table: str, width: int, org_id: int, lo: int, hi: int) -> list[tuple[str, list]]:
    """The statements that recount the rows of ``table`` (buckets of ``width``) of one organisation
    over ``[lo, hi)`` (whole buckets) from its raw events: delete them, then count again (the bucket
    as ``lo + (ts - lo) / width * width``, a floor for every ``ts >= lo`` in either engine)."""
    return [
        (f"DELETE FROM {table} WHERE org_id = %s AND bucket >= %s AND bucket < %s", [org_id, lo, hi]),
        (
            f"""INSERT INTO {table} ({EVENT_KEY}, bucket, n, spans)
                SELECT {EVENT_KEY}, %s + (ts - %s) / %s * %s AS counted, COUNT(*), COUNT(end_ts)
                FROM timeline_event WHERE org_id = %s AND ts >= %s AND ts < %s
                GROUP BY {EVENT_KEY}, counted""",
            [lo, lo, width, width, org_id, lo, hi],
        ),
    ]


def choose_event_rollup(step: int, origin: int) -> tuple[int, str] | None:
    """The coarsest event count table whose buckets each fall inside one bucket of a grid of ``step``
    beginning at ``origin`` (stored time: the grid's origin less the clock shift of the events), so a
    count row lands in exactly the grid bucket each of its events would; None: count raw events. A
    shift that is not a whole number of buckets would move events across bucket edges: then a finer
    table, or none."""
    for width, table in EVENT_ROLLUPS:
        if step % width == 0 and origin % width == 0:
            return width, table
    return None
