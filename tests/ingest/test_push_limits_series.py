"""Series cardinality: an organisation holds at most JOINTLINE_MAX_SERIES_PER_ORG series and one push
creates at most JOINTLINE_MAX_NEW_SERIES_PER_PUSH. A push over either is refused whole at push time
(400 naming ``series``); at apply time, the authority, series beyond the limit are left out and
counted on the batch, and the organisation's existing series keep their samples."""

import io
import json
import time

from django.test import TestCase, override_settings

from core.records import Batch, SeriesBlock
from ingest.models import BatchStatus, IngestBatch
from ingest.services import batch_apply
from store.base import labels_key
from tests.conftest import post_body
from tests.ingest.test_partitions import journal_entry
from timeline.models import Series


def node_batch(nodes: range, metric: str = "node_load1") -> dict:
    now_ms = int(time.time() * 1000) - 60_000
    return {
        "source": "node-exporter",
        "series": [
            {"metric": metric, "signal": "host", "labels": {"node": f"n{node}"}, "points": [[now_ms, 1.0]]}
            for node in nodes
        ],
    }


def push(client, document: dict):
    return post_body(client, "/api/v1/push", json.dumps(document).encode(), "application/json")


def hold_series(org, count: int, metric: str = "node_load1") -> None:
    """``count`` series of ``org`` stored already, named as :func:`node_batch` names them."""
    Series.unscoped.bulk_create(
        [
            Series(org=org, signal="host", metric=metric, labels={"node": f"n{node}"}, labels_key=key)
            for node in range(count)
            for key in [labels_key({"node": f"n{node}"})]
        ],
        batch_size=5000,
    )


def test_the_100001st_series_is_refused_with_a_clear_error(pusher_a, org_a):
    hold_series(org_a, 100_000)
    refused = push(pusher_a, node_batch(range(99_999, 100_001)))  # one series held, one new
    assert refused.status_code == 400, refused.content
    (error,) = refused.json()["errors"]
    assert error["field"] == "series"
    assert "holds 100000 series and may hold at most 100000 (JOINTLINE_MAX_SERIES_PER_ORG)" in error["reason"]
    assert "would add 1 new" in error["reason"]
    assert IngestBatch.objects.count() == 0
    assert push(pusher_a, node_batch(range(99_998, 100_000))).status_code == 202  # series it holds


@override_settings(JOINTLINE_MAX_NEW_SERIES_PER_PUSH=50)
def test_a_push_creating_more_new_series_than_allowed_is_refused_whole(pusher_a, org_a):
    hold_series(org_a, 10)
    refused = push(pusher_a, node_batch(range(61)))  # 10 held, 51 new
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {
            "field": "series",
            "reason": "51 new series in one push; at most 50 may be created per push "
            "(JOINTLINE_MAX_NEW_SERIES_PER_PUSH): send them in several pushes",
        }
    ]
    assert IngestBatch.objects.count() == 0
    assert push(pusher_a, node_batch(range(60))).status_code == 202


@override_settings(JOINTLINE_MAX_SERIES_PER_ORG=10)
def test_at_apply_time_new_series_beyond_the_limit_are_dropped_and_counted_never_silently(org_a, pusher_a):
    stamp = int(time.time() * 1_000_000) - 60_000_000

    def batch(nodes: range) -> Batch:
        blocks = [
            SeriesBlock("host", "node_load1", {"node": f"n{n}"}, "gauge", "", [stamp, stamp + 1], [1.0, 2.0])
            for n in nodes
        ]
        return Batch(source="agent", series=blocks)

    # Journaled while under the limit (as two pushes at once pass the check), applied afterwards.
    first, second = journal_entry(org_a, batch(range(8))), journal_entry(org_a, batch(range(5, 12)))
    batch_apply(batch_id=first.pk)
    batch_apply(batch_id=second.pk)
    second.refresh_from_db()
    assert second.status == BatchStatus.APPLIED
    assert (second.series_dropped, second.samples_dropped) == (2, 4)  # n10, n11: over 10
    assert second.samples_stored == 2 * 2  # n8, n9 new; n5-n7 were stored by the first
    assert "2 new series (4 samples) left out" in second.error
    assert Series.unscoped.filter(org=org_a).count() == 10
    status = pusher_a.get(f"/api/v1/batches/{second.pk}").json()
    assert (status["series_dropped"], status["samples_dropped"]) == (2, 4)

    held = journal_entry(org_a, batch(range(0, 10)))  # only series it holds: nothing dropped
    batch_apply(batch_id=held.pk)
    held.refresh_from_db()
    assert (held.status, held.series_dropped, held.error) == (BatchStatus.APPLIED, 0, "")


@override_settings(JOINTLINE_MAX_SERIES_PER_ORG=3)
def test_an_import_over_the_series_limit_is_refused_before_anything_is_journaled(pusher_a):
    rows = "".join(f"{int(time.time()) - 60},m{n},1\n" for n in range(4))
    handle = io.BytesIO(("t,m,v\n" + rows).encode())
    handle.name = "wide.csv"
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = pusher_a.post(
            "/api/v1/import",
            {"file": handle, "format": "csv", "mapping": '{"ts": "t", "metric": "m", "value": "v"}'},
            format="multipart",
        )
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["field"] == "series"
    assert IngestBatch.objects.count() == 0
