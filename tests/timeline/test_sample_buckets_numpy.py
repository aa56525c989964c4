"""Bucket reads PostgreSQL computes in numpy (store/postgres_sample_buckets.py: rates, values under
drifting clock corrections, fleet statistics) against the bucket query that computed them in the
database before (decision 0048) and against the in-memory reference store, over random series held
partly in blocks and partly in rows (late samples after compaction, batches sent again with other
values, NaN, gaps, counter resets), under no, constant and drifting corrections (one bounded in time,
one that rounds exact halves) and a grantee's time-windowed grant; windows cut at a sample's corrected
time and one microsecond after it, so a time shifted by 1 µs changes an answer."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from psycopg import sql

from orgs.access import Scope
from store import ReadHints, get_store
from store.clock_shifts import shift_array, shift_sql
from store.hints import ClockModel, Correction
from store.memory import MemoryStore
from store.postgres import PostgresStore
from store.postgres_wire import binary_cursor
from store.sample_reads import SampleReads
from tests.factories import HOUR, MINUTE, T0, S
from tests.timeline.test_store_equivalence import (
    SPAN,
    assert_same_buckets,
    assert_same_fleet,
    random_batches,
    random_blocks,
    viewers_and_reads,
    write_both,
)

pytestmark = pytest.mark.skipif(
    not get_store().capabilities.sample_blocks, reason="PostgreSQL's numpy reads over rows and blocks"
)


class DatabaseBucketStore(PostgresStore):
    """PostgreSQL as it answered before: rates and drifting corrections by the bucket query, fleet
    statistics by ``percentile_cont`` over the groups' bucket queries, all in the database."""

    def _bucket_part(self, cursor, key, ids, hints):
        if hints.rate or not all(c.constant for c in key[3]):
            return SampleReads._bucket_part(self, cursor, key, ids, hints)
        return super()._bucket_part(cursor, key, ids, hints)

    def _fleet_matrix(self, groups, readable, hints):
        parts, params = [], []
        for key, ids in groups.items():
            part, group_params = self._bucket_sql(key, ids, hints)
            parts.append(sql.SQL("({})").format(sql.SQL(part)))
            params.extend(group_params)
        with binary_cursor(self.connection) as cursor:
            query = sql.SQL(
                """SELECT bucket, MIN(vmin), MAX(vmax),
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY vmean),
                       percentile_cont(0.05) WITHIN GROUP (ORDER BY vmean),
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY vmean), SUM(vmean), COUNT(*)
                    FROM ({}) AS s (series_id, bucket, vmin, vmax, vmean, n)
                    GROUP BY bucket"""
            ).format(sql.SQL(" UNION ALL ").join(parts))
            cursor.execute(query.as_string(), params)
            return np.asarray(cursor.fetchall(), dtype=np.float64).reshape(-1, 8)


def more_clocks(org) -> dict[str, ClockModel]:
    """A drifting correction bounded in time (rows outside it unshifted), and one of 1,800 µs an hour
    from half a second past T0: every whole second from there shifts by an exact half microsecond
    before rounding (half away from zero, as :meth:`Correction.shift_at`)."""
    bounded = Correction(3, org.pk, None, None, -7 * S, -900_000, T0, T0 + 40 * MINUTE, T0 + 2 * HOUR)
    halves = Correction(4, org.pk, None, None, 0, 1_800, T0 + S // 2, None, None)
    return {"bounded drift": ClockModel((bounded,)), "exact halves": ClockModel((halves,))}


def edge_reads(reference: MemoryStore, scope: Scope, ids: list[int], clocks: dict) -> list[tuple]:
    """Per clock, windows whose start and end are a stored sample's corrected time, or that plus 1 µs,
    on a step that puts other samples on bucket edges."""
    arrays = reference.select_sample_arrays(scope, ids, ReadHints(start=T0, end=T0 + SPAN))
    series_id = max(arrays, key=lambda sid: len(arrays[sid][0]))
    ts = arrays[series_id][0]
    out = []
    for clock_name, clock in clocks.items():
        (correction,) = clock.corrections or (None,)
        first, last = int(ts[len(ts) // 5]), int(ts[4 * len(ts) // 5])
        start, end = (t + (0 if correction is None else correction.shift_at(t)) for t in (first, last))
        step = int(ts[len(ts) // 5 + 3] - ts[len(ts) // 5])
        for nudge in (0, 1):
            for fn in ("value", "rate"):
                hints = ReadHints(
                    start=start + nudge, end=end + nudge, step=step, fn=fn, clock=clock, ordered=True
                )
                out.append((clock_name, hints))
    return out


@pytest.mark.parametrize("seed", [31, 32])
def test_numpy_bucket_reads_answer_as_the_database_and_the_reference(seed, org_a, org_b):
    rng = np.random.default_rng(seed)
    compared = get_store()
    before = DatabaseBucketStore(connection)
    reference = MemoryStore(connection, relational=compared)
    batches = random_batches(rng, random_blocks(rng, 6))
    compact_after = set(rng.choice(len(batches), size=max(2, len(batches) // 3), replace=False).tolist())
    for index, batch in enumerate(batches):
        write_both(compared, reference, org_a.pk, batch)
        if index in compact_after:
            compared.compact_settled_samples()
    ids, viewers, clocks, reads = viewers_and_reads(rng, org_a, org_b)
    clocks = {**clocks, **more_clocks(org_a)}
    reads = [
        *reads,
        *edge_reads(reference, viewers["owner"], ids, clocks),
        *(
            (name, ReadHints(start=T0 + 17, end=T0 + SPAN, step=7 * S + 3, fn=fn, clock=clock, ordered=True))
            for name, clock in more_clocks(org_a).items()
            for fn in ("value", "rate")
        ),
    ]
    compared_reads = 0
    for refreshed in (False, True):
        if refreshed:
            compared.refresh_stale_rollups()
        for viewer_name, viewer in viewers.items():
            for clock_name, hints in reads:
                where = f"seed {seed}, {viewer_name}, {clock_name}, refreshed {refreshed}, {hints}"
                found = compared.select_buckets(viewer, ids, hints)
                assert_same_buckets(before.select_buckets(viewer, ids, hints), found, where)
                assert_same_buckets(reference.select_buckets(viewer, ids, hints), found, where)
                fleet = compared.fleet_stats(viewer, ids, hints)
                assert_same_fleet(before.fleet_stats(viewer, ids, hints), fleet, where)
                if viewer_name == "owner":
                    assert_same_fleet(reference.fleet_stats(viewer, ids, hints), fleet, where)
                compared_reads += bool(len(found["bucket"]))
    assert compared_reads > len(reads)  # most reads found buckets


def test_a_correction_shifts_each_time_as_the_database_and_shift_at_do(org_a):
    rng = np.random.default_rng(5)
    reference = T0 + S // 2
    ts = np.concatenate(
        [
            reference + np.arange(-40, 40, dtype=np.int64) * S,  # exact halves before rounding
            T0 + rng.integers(-30 * 86_400 * S, 30 * 86_400 * S, 2_000),
        ]
    )
    corrections = [
        Correction(1, org_a.pk, None, None, 250_000, 1_800, reference, None, None),
        Correction(2, org_a.pk, None, None, -3 * S, -37_000, reference, T0 - HOUR, T0 + 9 * HOUR),
        Correction(3, org_a.pk, None, None, 11, 0, reference, None, None),
    ]
    store = get_store()
    for correction in corrections:
        expected = [correction.shift_at(t) for t in ts.tolist()]
        assert shift_array(correction, ts).tolist() == expected
        term, params = shift_sql(correction, store.round_half_away)
        query = sql.SQL("SELECT {} FROM unnest(%s::bigint[]) WITH ORDINALITY AS x (ts, i) ORDER BY i")
        text_of_query = query.format(sql.SQL(term)).as_string()
        with connection.cursor() as text, binary_cursor(connection) as binary:
            for cursor in (text, binary):  # parameters bound on the client, and by the server
                cursor.execute(text_of_query, [*params, ts.tolist()])
                assert [row[0] for row in cursor.fetchall()] == expected
