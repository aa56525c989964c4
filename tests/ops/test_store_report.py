"""manage.py store_report: rows and bytes per organisation and signal."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import nic_batch, push

pytestmark = pytest.mark.django_db


def report(*args) -> str:
    out = StringIO()
    call_command("store_report", *args, stdout=out)
    return out.getvalue()


def test_store_report_counts_rows_per_organisation_and_signal(pusher_a):
    assert push(pusher_a, nic_batch(points=9)).status_code == 202
    data = json.loads(report("--json"))
    by_signal = {(s["org"], s["signal"]): s for s in data["signals"]}
    assert by_signal[("modeldev", "network")]["samples"] == 9
    assert by_signal[("modeldev", "network")]["series"] == 1
    assert by_signal[("modeldev", "application")]["events"] == 1
    assert data["journal"] == [
        {
            "org": "modeldev",
            "entries": 1,
            "pending": 0,
            "failed": 0,
            "payload_bytes": data["journal"][0]["payload_bytes"],
        }
    ]
    assert data["journal"][0]["payload_bytes"] > 0


@pytest.mark.services
def test_store_report_on_postgresql_measures_partitions_and_shares_their_bytes(pusher_a):
    assert push(pusher_a, nic_batch(points=9)).status_code == 202
    data = json.loads(report("--json"))
    network = next(s for s in data["signals"] if s["signal"] == "network")
    assert network["samples_bytes"] == data["table_bytes"]["timeline_sample"] > 0
    assert "timeline_sample_p20260615" in {p["name"] for p in data["partitions"]}
    text = report("--partitions")
    assert "timeline_sample_p20260615" in text
    assert text.splitlines()[0].startswith("Store on postgresql")


@pytest.mark.services
def test_store_report_can_estimate_samples_from_a_table_sample(pusher_a):
    assert push(pusher_a, nic_batch(points=9)).status_code == 202
    data = json.loads(report("--json", "--sample", "100"))
    assert data["sampled_percent"] == 100
    assert next(s for s in data["signals"] if s["signal"] == "network")["samples"] == 9


def test_store_report_refuses_a_sample_that_is_not_a_percentage():
    with pytest.raises(CommandError, match="not a percentage"):
        report("--sample", "0")
