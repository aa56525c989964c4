"""A file import reaches at most JOINTLINE_IMPORT_MAX_AGE_DAYS back and JOINTLINE_FUTURE_TOLERANCE_S
ahead: years 1 and 9999 are refused naming the field, a backfill inside the horizon is journaled."""

import io
import time

import pytest
from django.test import TestCase, override_settings

from ingest.models import IngestBatch

DAY_S = 86_400
MAPPING = '{"ts": "t", "metric": "m", "value": "v"}'


def upload_csv(client, rows: list[tuple[str, float]]):
    data = "t,m,v\n" + "".join(f"{ts},backfill_metric,{value}\n" for ts, value in rows)
    handle = io.BytesIO(data.encode())
    handle.name = "history.csv"
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(
            "/api/v1/import", {"file": handle, "format": "csv", "mapping": MAPPING}, format="multipart"
        )


def iso_days_ago(days: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * DAY_S))


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z"])
def test_an_import_of_year_1_or_9999_is_refused_naming_the_field(pusher_a, stamp):
    response = upload_csv(pusher_a, [(iso_days_ago(1), 1.0), (stamp, 2.0)])
    assert response.status_code == 400, response.content
    (error,) = response.json()["errors"]
    assert error["field"].startswith("series[0].ts[")  # the batch's points, in time order
    assert ("older than the accept window" in error["reason"]) or ("in the future" in error["reason"])
    assert IngestBatch.objects.count() == 0


@override_settings(JOINTLINE_IMPORT_MAX_AGE_DAYS=3650)
def test_an_import_reaches_back_to_its_horizon_and_no_further(pusher_a):
    inside = upload_csv(pusher_a, [(iso_days_ago(3649), 1.0), (iso_days_ago(1), 2.0)])
    assert inside.status_code == 202, inside.content
    beyond = upload_csv(pusher_a, [(iso_days_ago(3651), 1.0)])
    assert beyond.status_code == 400
    assert "(3650 days, oldest accepted" in beyond.json()["errors"][0]["reason"]


def test_an_import_a_few_minutes_ahead_is_kept_but_not_an_hour_ahead(pusher_a):
    ahead = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))
    assert upload_csv(pusher_a, [(ahead, 1.0)]).status_code == 202
    far = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    refused = upload_csv(pusher_a, [(far, 1.0)])
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "series[0].ts[0]"
