"""The ClickHouse sample table and the reads of it, as SQL with bound ``{name:Type}`` parameters.

Every value from a request (series ids, organisation ids, window, step, corrections) reaches the
engine as a parameter; the text is built only from this module's constants. The queries follow the
base store's SQL (``store.base``) clause for clause, so buckets, rates and corrections read
the same on every engine. docs/decisions/0008-clickhouse-backend.md records why the table is so.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.hints import Correction, ReadHints

SAMPLE_TABLE = "timeline_sample"
SAMPLE_COLUMNS = ("org_id", "series_id", "ts", "value")

# ReplacingMergeTree: a (series, ts) inserted twice is one row after a merge, and FINAL makes every
# read see one before it. Calendar-month partitions (retention drops whole months; a month holds
# enough rows per series for the primary key to skip); codecs measured in bench/clickhouse.py.
SAMPLE_SCHEMA = f"""CREATE TABLE IF NOT EXISTS {SAMPLE_TABLE} (
    org_id Int64 CODEC(ZSTD(1)),
    series_id Int64 CODEC(ZSTD(1)),
    ts Int64 CODEC(Delta(8), ZSTD(1)),
    value Float64 CODEC(ZSTD(1))
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(fromUnixTimestamp64Micro(ts, 'UTC'))
ORDER BY (org_id, series_id, ts)"""

ROUND_HALF_AWAY = "if({x} >= 0, floor({x} + 0.5), -floor(-({x}) + 0.5))"


class Params:
    """Named query parameters: ``params(value, "Int64")`` binds a value and returns its placeholder."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    def __call__(self, value: object, type_: str = "Int64") -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f"{{{name}:{type_}}}"


def correction_sql(correction: Correction, p: Params) -> str:
    """The shift of stored ``ts`` by one correction, rounded as :meth:`Correction.shift_at` rounds
    (half away from zero, which ClickHouse's ``round`` does not do for floats)."""
    term = p(correction.offset_us)
    if correction.drift_us_per_hour:
        per_hour = p(float(correction.drift_us_per_hour), "Float64")
        drift = f"((ts - {p(correction.reference_us)}) * {per_hour}) / 3600000000.0"
        term = f"({term} + toInt64({ROUND_HALF_AWAY.format(x=drift)}))"
    bounds = []
    if correction.valid_from is not None:
        bounds.append(f"ts >= {p(correction.valid_from)}")
    if correction.valid_to is not None:
        bounds.append(f"ts < {p(correction.valid_to)}")
    if not bounds:
        return term
    return f"if({' AND '.join(bounds)}, {term}, 0)"


@dataclass(frozen=True)
class Plan:
    """What one group of series reads: stored rows ``[raw_lo, raw_hi)``, shifted row by row by
    ``drifting`` corrections (else not at all), bucketed from ``origin``, kept in ``[lo, hi)``."""

    raw_lo: int
    raw_hi: int
    drifting: tuple[Correction, ...]
    origin: int
    lo: int
    hi: int


def plan(key: tuple, hints: ReadHints, *, lookback: int) -> Plan:
    """The numbers of ``StoreBackend._source`` for a group key ``(lo, hi, bounded, corrections)``: a
    constant shift moves the grid, drifting corrections shift the rows."""
    lo, hi, bounded, corrections = key
    start, end = hints.start, hints.end
    lookback = 0 if bounded else lookback
    if corrections and not all(c.constant for c in corrections):
        low, high = hints.clock.shift_bounds(corrections, start, end)
        raw_lo, raw_hi = start - high - lookback, end - low
        raw_lo = max(raw_lo, lo) if lo is not None else raw_lo
        raw_hi = min(raw_hi, hi) if hi is not None else raw_hi
        return Plan(raw_lo, raw_hi, corrections, start, start, end)
    origin = start
    if corrections:
        shift = sum(c.offset_us for c in corrections)
        origin, end = start - shift, end - shift
        lo, hi = max(origin, lo if lo is not None else origin), min(end, hi if hi is not None else end)
    return Plan(lo - lookback, hi, (), origin, lo, hi)


def source_sql(plan_: Plan, org_ids: list[int], series_ids: list[int], p: Params) -> str:
    """Rows ``(sid, t, v)`` of the plan's series with corrected time ``t``, one per (series, ts)."""
    shift = " + ".join(f"({correction_sql(c, p)})" for c in plan_.drifting)
    t = f"ts + {shift}" if shift else "ts"
    return f"""(SELECT series_id AS sid, {t} AS t, value AS v FROM {SAMPLE_TABLE} FINAL
        WHERE org_id IN {p(org_ids, "Array(Int64)")} AND series_id IN {p(series_ids, "Array(Int64)")}
          AND ts >= {p(plan_.raw_lo)} AND ts < {p(plan_.raw_hi)})"""


def bucket_sql(source: str, plan_: Plan, hints: ReadHints, p: Params) -> str:
    """Columns ``sid, b, vmin, vmax, vmean, n`` (all Float64) per series and bucket of ``source``, as
    ``StoreBackend._bucket_query``: with ``rate``, per-second rates between consecutive samples, a
    decrease counting as a counter reset (the increase is the new value), rows before ``lo`` serving
    only as the previous sample."""
    order = " ORDER BY sid, b" if hints.ordered else ""
    origin, step = p(plan_.origin), p(hints.step)
    keep = f"t >= {p(plan_.lo)} AND t < {p(plan_.hi)}"
    if not hints.rate:
        return f"""SELECT toFloat64(sid) AS series, toFloat64(intDiv(t - {origin}, {step})) AS b,
                min(v) AS vmin, max(v) AS vmax, avg(v) AS vmean, toFloat64(count()) AS n
            FROM {source} WHERE {keep} GROUP BY sid, b{order}"""
    return f"""SELECT toFloat64(sid) AS series, toFloat64(intDiv(t - {origin}, {step})) AS b,
            min(r) AS vmin, max(r) AS vmax, sum(inc) * 1000000.0 / sum(el) AS vmean,
            toFloat64(count()) AS n
        FROM (
            SELECT sid, t, if(v >= pv, v - pv, v) AS inc, t - pt AS el, inc * 1000000.0 / el AS r
            FROM (
                SELECT sid, t, v, lagInFrame(v) OVER w AS pv, lagInFrame(t) OVER w AS pt,
                       count() OVER w AS rows_in_frame
                FROM {source}
                WINDOW w AS (PARTITION BY sid ORDER BY t ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
            ) WHERE rows_in_frame = 2
        ) WHERE {keep} AND el > 0
        GROUP BY sid, b{order}"""


def sample_sql(source: str, plan_: Plan, hints: ReadHints, p: Params) -> str:
    """Columns ``sid, ts, value`` (Int64, Int64, Float64) of ``source`` rows kept by the plan, in
    corrected time (a constant shift read the rows in stored time: added back here)."""
    shift = p(hints.start - plan_.origin)
    return f"""SELECT sid, t + {shift}, v FROM {source}
        WHERE t >= {p(plan_.lo)} AND t < {p(plan_.hi)}"""


def fleet_sql(parts: list[str]) -> str:
    """Per bucket across the per-series rows of ``parts`` (bucket queries): ``lo, hi`` (min of minima,
    max of maxima), the median, 5th and 95th percentile of the means (interpolated between ranks, as
    PostgreSQL's ``percentile_cont``), their sum and the number of series, all Float64."""
    rows = " UNION ALL ".join(f"SELECT b, vmin, vmax, vmean FROM ({part})" for part in parts)
    return f"""SELECT b, lo, hi, q[1], q[2], q[3], total, n FROM (
            SELECT b, min(vmin) AS lo, max(vmax) AS hi, sum(vmean) AS total, toFloat64(count()) AS n,
                   quantilesExactInclusive(0.5, 0.05, 0.95)(vmean) AS q
            FROM ({rows}) GROUP BY b)"""
