"""File import: the loghub samples, the Alibaba pod list, Prometheus text, CSV and JSONL by mapping;
through the management command and POST /api/v1/import."""

import datetime
import io
import json
import zoneinfo
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import TestCase

from ingest.importers import ImportFileError, ImportSpec, read_batches
from ingest.models import IngestBatch
from store.base import event_fingerprint
from tests.ingest.protocol_helpers import stored_events, stored_series

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
if not DATA.exists():  # CI lays shared/ beside the clone; a developer's tree has it at /work/shared
    DATA = Path("/work/shared/data")
LOGHUB = DATA / "loghub"
PODS = DATA / "alibaba-gpu-v2023" / "openb_pod_list_default.csv"

needs_data = pytest.mark.skipif(not LOGHUB.exists(), reason=f"shared data not found at {DATA}")


def events_of(spec: ImportSpec, data: bytes | Path):
    lines = data.open("rb") if isinstance(data, Path) else io.BytesIO(data)
    with lines:
        return [event for batch in read_batches(lines, spec) for event in batch.events]


def loghub_sample(spec: ImportSpec, name: str):
    """The events of the loghub sample file ``name``: one for each of its 2,000 lines."""
    events = events_of(spec, LOGHUB / name)
    assert len(events) == 2000
    return events


def series_of(spec: ImportSpec, data: bytes):
    return [block for batch in read_batches(io.BytesIO(data), spec) for block in batch.series]


def us(text: str, zone: str = "UTC") -> int:
    moment = datetime.datetime.fromisoformat(text).replace(tzinfo=zoneinfo.ZoneInfo(zone))
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


# --------------------------------------------------------------------------- loghub samples


@needs_data
def test_bgl_lines_become_events_at_the_epoch_second_plus_the_local_microseconds():
    events = loghub_sample(ImportSpec(format="bgl", source="BGL_2k.log"), "BGL_2k.log")
    first = events[0]
    # 2005-06-03-15.42.50.675872 is Livermore local time (PDT), the same instant as epoch 1117838570.
    assert first.ts == us("2005-06-03 15:42:50.675872", "America/Los_Angeles") == 1117838570_675872
    assert (first.name, first.severity, first.signal) == ("RAS KERNEL", "info", "host")
    assert first.resource == {"node": "R02-M1-N0-C:J12-U11"}
    assert first.message == "instruction cache parity error corrected"
    fatal = [e for e in events if e.severity == "critical"]
    assert len(fatal) == 347
    assert any(e.attributes.get("alert") == "KERNDTLB" for e in fatal)


@needs_data
def test_hpc_lines_become_events_in_epoch_seconds():
    events = loghub_sample(ImportSpec(format="hpc", source="HPC_2k.log"), "HPC_2k.log")
    first = events[0]
    assert first.ts == 1077804742 * 1_000_000
    assert (first.name, first.severity, first.resource) == ("unix.hw", "warning", {"node": "node-246"})
    assert 'Component "SCSI-WWID' in first.message
    assert first.attributes == {"state": "state_change.unavailable", "flag": "1", "log_id": "134681"}


@needs_data
def test_thunderbird_lines_name_their_program():
    events = loghub_sample(ImportSpec(format="thunderbird", source="tb"), "Thunderbird_2k.log")
    first = events[0]
    assert first.ts == 1131566461 * 1_000_000
    assert (first.name, first.message, first.resource) == (
        "crond",
        "session closed for user root",
        {"node": "dn228"},
    )
    assert first.attributes["pid"] == 2915
    assert {e.name for e in events} >= {"gmetad", "ntpd", "crond"}


@needs_data
def test_syslog_needs_a_year_and_a_timezone():
    with pytest.raises(ImportFileError, match="year"):
        events_of(ImportSpec(format="syslog", source="x", timezone="UTC"), LOGHUB / "Linux_2k.log")
    with pytest.raises(ImportFileError, match="timezone"):
        events_of(ImportSpec(format="syslog", source="x", year=2005), LOGHUB / "Linux_2k.log")


@needs_data
def test_syslog_lines_are_read_in_the_declared_year_and_zone():
    spec = ImportSpec(format="syslog", source="Linux_2k.log", year=2005, timezone="America/New_York")
    events = loghub_sample(spec, "Linux_2k.log")
    assert events[0].ts == us("2005-06-14 15:16:01", "America/New_York")
    assert (events[0].name, events[0].resource) == ("sshd", {"node": "combo"})
    assert events[-1].ts > events[0].ts


def test_syslog_moves_to_the_next_year_when_the_month_goes_back():
    data = b"Dec 31 23:59:59 host a: last\nJan  1 00:00:01 host a: first\n"
    events = events_of(ImportSpec(format="syslog", source="x", year=2025, timezone="UTC"), data)
    assert [e.ts for e in events] == [us("2025-12-31 23:59:59"), us("2026-01-01 00:00:01")]


def test_continuation_lines_join_the_previous_entry():
    data = b"Jun 14 15:16:01 host app[1]: Traceback:\n  File x, line 3\nJun 14 15:16:02 host app[1]: next\n"
    events = events_of(ImportSpec(format="syslog", source="x", year=2025, timezone="UTC"), data)
    assert [e.message for e in events] == ["Traceback:\n  File x, line 3", "next"]


def test_a_bad_line_rejects_the_file_naming_the_line():
    data = b"- 1117838570 2005.06.03 R02 2005-06-03-15.42.50.675872 R02 RAS KERNEL LOUD text\n"
    with pytest.raises(ImportFileError) as caught:
        events_of(ImportSpec(format="bgl", source="x"), data)
    assert caught.value.errors[0].field == "line 1"
    assert "LOUD" in caught.value.errors[0].reason


# --------------------------------------------------------------------------- the Alibaba pod list


@needs_data
def test_alibaba_pods_become_scheduler_spans_from_a_declared_origin():
    spec = ImportSpec(format="alibaba-pods", source="openb", origin="2023-07-01T00:00:00Z")
    events = events_of(spec, PODS)
    origin = us("2023-07-01 00:00:00")
    by_pod = {}
    for event in events:
        by_pod.setdefault(event.resource["pod"], []).append(event)
    assert len(by_pod) == 8152
    (running,) = by_pod["openb-pod-0000"]  # created and scheduled at second 0
    assert (running.name, running.kind, running.signal) == ("pod.running", "span", "scheduler")
    assert (running.ts, running.end_ts) == (origin, origin + 12537496 * 1_000_000)
    assert running.attributes["num_gpu"] == 1
    (pending,) = by_pod["openb-pod-0061"]  # never scheduled: pending until deleted
    assert (pending.name, pending.ts, pending.end_ts) == (
        "pod.pending",
        origin + 10001278_000000,
        origin + 10001403_000000,
    )
    failed = by_pod["openb-pod-0033"][0]
    assert (failed.attributes["phase"], failed.severity) == ("Failed", "warning")


def test_alibaba_pods_need_an_origin():
    with pytest.raises(ImportFileError, match="origin"):
        events_of(ImportSpec(format="alibaba-pods", source="x"), b"name\n")


def test_a_pod_that_would_end_before_it_starts_is_an_error():
    data = b"name,creation_time,scheduled_time,deletion_time,pod_phase\np,100,50,200,Running\n"
    with pytest.raises(ImportFileError) as caught:
        events_of(ImportSpec(format="alibaba-pods", source="x", origin="2023-07-01T00:00:00Z"), data)
    assert (caught.value.errors[0].field, caught.value.errors[0].reason) == (
        "line 2",
        "scheduled_time is before creation_time",
    )


# --------------------------------------------------------------------------- Prometheus text, CSV, JSONL


def test_prometheus_text_with_timestamps():
    data = b"""# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device="ib0"} 1.5e12 1781485200000
node_network_receive_bytes_total{device="ib0"} 1.6e12 1781485215000
node_load1 3.5 1781485200000
"""
    blocks = series_of(ImportSpec(format="prom", source="dump"), data)
    rx = next(b for b in blocks if b.metric == "node_network_receive_bytes_total")
    assert (rx.kind, rx.signal, rx.ts, rx.labels) == (
        "counter",
        "network",
        [1781485200000000, 1781485215000000],
        {"device": "ib0"},
    )


def test_prometheus_text_without_timestamps_needs_a_default_time():
    with pytest.raises(ImportFileError) as caught:
        series_of(ImportSpec(format="prom", source="dump"), b"node_load1 3.5\n")
    assert caught.value.errors[0].field == "line 1"
    spec = ImportSpec(format="prom", source="dump", default_ts="2026-06-15T01:00:00Z")
    assert series_of(spec, b"node_load1 3.5\n")[0].ts == [us("2026-06-15 01:00:00")]


def test_csv_rows_become_samples_by_mapping():
    data = b"time,node,metric,value\n2026-06-15 10:00:00,node-1,gpu_util,97\n"
    data += b"2026-06-15 10:00:15,node-1,gpu_util,98.5\n"
    mapping = {"ts": "time", "metric": "metric", "value": "value", "labels": ["node"], "signal": "gpu"}
    spec = ImportSpec(format="csv", source="x", timezone="Asia/Seoul", mapping=mapping)
    (block,) = series_of(spec, data)
    assert (block.metric, block.labels, block.signal, block.values) == (
        "gpu_util",
        {"node": "node-1"},
        "gpu",
        [97.0, 98.5],
    )
    assert block.ts[0] == us("2026-06-15 10:00:00", "Asia/Seoul")


def test_a_wide_csv_makes_one_series_per_value_column():
    data = b"ts,node,temp,power\n1781485200,n1,61,300\n1781485215,n1,,310\n"
    mapping = {"ts": "ts", "ts_unit": "s", "values": ["temp", "power"], "labels": ["node"]}
    blocks = {b.metric: b for b in series_of(ImportSpec(format="csv", source="x", mapping=mapping), data)}
    assert blocks["temp"].values == [61.0]
    assert blocks["power"].values == [300.0, 310.0]


def test_csv_rows_with_an_end_become_spans():
    data = b"start,end,job,state\n2026-06-15T01:00:00Z,2026-06-15T02:00:00Z,train,COMPLETED\n"
    mapping = {"ts": "start", "end_ts": "end", "message": "state", "name": "job", "signal": "scheduler"}
    (event,) = events_of(ImportSpec(format="csv", source="x", mapping=mapping), data)
    assert (event.kind, event.name, event.message, event.signal) == (
        "span",
        "train",
        "COMPLETED",
        "scheduler",
    )
    assert event.end_ts - event.ts == 3600 * 1_000_000


def test_jsonl_rows_by_mapping_with_nested_fields():
    data = b'{"t": 1781485200123, "log": {"msg": "hello", "lvl": "WARN"}, "host": "n1", "pid": 7}\n\n'
    mapping = {
        "ts": "t",
        "message": "log.msg",
        "severity": "log.lvl",
        "resource": ["host"],
        "attributes": ["pid"],
    }
    (event,) = events_of(ImportSpec(format="jsonl", source="x", mapping=mapping), data)
    assert (event.ts, event.message, event.severity) == (1781485200123000, "hello", "warning")
    assert (event.resource, event.attributes) == ({"host": "n1"}, {"pid": 7})


@pytest.mark.parametrize(
    ("mapping", "field"),
    [
        (None, "mapping"),
        ({"metric": "m", "value": "v"}, "mapping.ts"),
        ({"ts": "t", "lables": ["x"], "value": "v", "metric": "m"}, "mapping.lables"),
        ({"ts": "t", "value": "v"}, "mapping.metric"),
        ({"ts": "t", "message": "m", "value": "v"}, "mapping.message"),
        ({"ts": "t", "metric": "m", "value": "v", "kind": "histogram"}, "mapping.kind"),
    ],
)
def test_an_unusable_mapping_is_refused_naming_the_field(mapping, field):
    with pytest.raises(ImportFileError) as caught:
        series_of(ImportSpec(format="csv", source="x", mapping=mapping), b"t,m,v\n")
    assert field in [error.field for error in caught.value.errors]


def test_bad_csv_rows_are_reported_by_line():
    data = b"t,m,v\n1781485200,a,1\nnot-a-time,a,2\n1781485230,a,x\n"
    with pytest.raises(ImportFileError) as caught:
        series_of(
            ImportSpec(format="csv", source="x", mapping={"ts": "t", "metric": "m", "value": "v"}), data
        )
    assert [error.field for error in caught.value.errors] == ["line 3", "line 4"]


# --------------------------------------------------------------------------- storable records, days per batch

DAY_US = 86_400_000_000


def distinct_days(batch) -> set[int]:
    days = {ts // DAY_US for block in batch.series for ts in block.ts}
    return days | {event.ts // DAY_US for event in batch.events}


@needs_data
def test_a_file_spanning_545_days_is_cut_into_batches_of_at_most_31_days():
    with (LOGHUB / "HPC_2k.log").open("rb") as lines:
        batches = list(read_batches(lines, ImportSpec(format="hpc", source="HPC_2k.log")))
    spans = [distinct_days(batch) for batch in batches]
    every_day = set().union(*spans)
    assert max(every_day) - min(every_day) >= 544
    assert all(len(days) <= 31 for days in spans)
    assert len(batches) >= 18
    assert sum(batch.event_count for batch in batches) == 2000


ALIGNED_S = 12_400 * 86_400 + 3_600  # 2003-12-13T01:00Z: day 12400 starts a window of 5 and of 31 days


def test_the_days_a_batch_may_span_are_an_option_and_order_is_kept_within_each():
    lines = b"".join(
        f"{i} node-{i} unix.hw state_change.unavailable {ALIGNED_S + day * 86_400} 1 day {day}\n".encode()
        for i, day in enumerate([0, 1, 9, 2, 5, 3])
    )
    batches = list(read_batches(io.BytesIO(lines), ImportSpec(format="hpc", source="x", batch_days=5)))
    assert [[event.message for event in batch.events] for batch in batches] == [
        ["day 0", "day 1", "day 2", "day 3"],
        ["day 9", "day 5"],
    ]


def test_series_points_are_cut_by_day_windows_too():
    rows = "".join(f"{ALIGNED_S + day * 86_400},a,{day}\n" for day in range(70))
    spec = ImportSpec(format="csv", source="x", mapping={"ts": "t", "metric": "m", "value": "v"})
    batches = list(read_batches(io.BytesIO(("t,m,v\n" + rows).encode()), spec))
    assert all(len(distinct_days(batch)) <= 31 for batch in batches) and len(batches) == 3
    assert sorted(v for batch in batches for block in batch.series for v in block.values) == list(range(70))


def test_a_log_line_the_store_cannot_hold_rejects_the_file_naming_line_and_field():
    data = (
        b"- 1117838570 2005.06.03 R02 2005-06-03-15.42.50.675872 R02 RAS KERNEL INFO fine\n"
        b"- 1117838571 2005.06.03 R0\x002 2005-06-03-15.42.51.675872 R02 RAS KERNEL INFO bad node\n"
    )
    with pytest.raises(ImportFileError) as caught:
        events_of(ImportSpec(format="bgl", source="x"), data)
    ((error),) = caught.value.errors
    assert error.field == "line 2"
    assert error.reason.startswith("resource.node: contains a NUL character (U+0000)")


def test_a_nul_in_a_log_message_is_kept_but_not_in_its_host():
    spec = ImportSpec(format="syslog", source="x", year=2025, timezone="UTC")
    assert [event.message for event in events_of(spec, b"Jun 14 15:16:01 host app[1]: bin\x00ary\n")] == [
        "bin\x00ary"
    ]
    with pytest.raises(ImportFileError) as caught:
        events_of(spec, b"Jun 14 15:16:01 ho\x00st app[1]: bin\x00ary\n")
    assert caught.value.errors[0].reason.startswith("resource.node: contains a NUL")


def test_a_csv_label_the_store_cannot_hold_is_reported_by_line():
    data = b"t,m,v,node\n1781485200,a,1,n1\n1781485215,a,2,n\x002\n"
    spec = ImportSpec(
        format="csv", source="x", mapping={"ts": "t", "metric": "m", "value": "v", "labels": ["node"]}
    )
    with pytest.raises(ImportFileError) as caught:
        series_of(spec, data)
    assert [(e.field, e.reason.split(":")[0]) for e in caught.value.errors] == [("line 3", "labels.node")]


def test_prometheus_label_escapes_the_store_cannot_hold_are_reported_by_line():
    data = b'up{job="a\\x00b"} 1 1781485200000\n'
    with pytest.raises(ImportFileError) as caught:
        series_of(ImportSpec(format="prom", source="x"), data)
    assert caught.value.errors[0].field == "line 1" and "NUL" in caught.value.errors[0].reason


# --------------------------------------------------------------------------- through the journal


@needs_data
def test_an_import_of_2005_logs_is_journaled_in_batches_of_at_most_the_push_day_span(org_a, settings):
    settings.JOINTLINE_PUSH_MAX_DAYS = 10
    args = ("import_file", "modeldev", str(LOGHUB / "HPC_2k.log"), "--format", "hpc", "--no-progress")
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command(*args)
    entries = list(IngestBatch.objects.all())
    assert sum(entry.event_count for entry in entries) == 2000
    from core.records import decode_batch

    assert all(len(distinct_days(decode_batch(bytes(entry.payload)))) <= 10 for entry in entries)
    assert min(event.ts for event in stored_events(org_a)) < 1_104_537_600_000_000  # 2005: no age limit


@needs_data
def test_the_command_imports_a_file_through_the_journal_once(org_a, capsys):
    path = LOGHUB / "Thunderbird_2k.log"
    distinct = {event_fingerprint(e) for e in events_of(ImportSpec(format="thunderbird", source="x"), path)}
    args = ("import_file", "modeldev", str(path), "--format", "thunderbird", "--no-progress")
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command(*args)
    assert "2000 events" in capsys.readouterr().out
    assert len(stored_events(org_a)) == len(distinct)  # the log repeats a few lines within one second
    assert set(IngestBatch.objects.values_list("protocol", flat=True)) == {"import"}
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command(*args)
    assert "1 already there" in capsys.readouterr().out
    assert len(stored_events(org_a)) == len(distinct)


def test_the_command_stores_nothing_from_a_file_with_a_bad_line(org_a, tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("t,m,v\n1781485200,a,1\n1781485215,a,oops\n")
    with pytest.raises(CommandError, match="line 3"):
        call_command(
            "import_file",
            "modeldev",
            str(path),
            "--format",
            "csv",
            "--mapping",
            '{"ts":"t","metric":"m","value":"v"}',
        )
    assert IngestBatch.objects.count() == 0


def test_the_command_reads_a_mapping_file_and_refuses_an_unknown_org(org_a, tmp_path):
    mapping = tmp_path / "mapping.json"
    mapping.write_text('{"ts": "t", "metric": "m", "value": "v"}')
    data = tmp_path / "m.csv"
    data.write_text("t,m,v\n1781485200,a,1\n")
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command(
            "import_file",
            "modeldev",
            str(data),
            "--format",
            "csv",
            "--mapping",
            f"@{mapping}",
            "--no-progress",
        )
    assert list(stored_series(org_a)) == [("a", ())]
    with pytest.raises(CommandError, match="no organisation"):
        call_command("import_file", "nobody", str(data), "--format", "csv")


def upload(client, data: bytes, name: str, **fields):
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(
            "/api/v1/import",
            {"file": io.BytesIO(data), **fields} | {"file": _named(data, name)},
            format="multipart",
        )


def _named(data: bytes, name: str):
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def test_the_import_api_takes_a_file_with_its_options(pusher_a, org_a):
    data = b"Jun 14 15:16:01 combo sshd[1]: failure\nJun 14 15:16:02 combo sshd[1]: again\n"
    response = upload(pusher_a, data, "auth.log", format="syslog", year="2005", timezone="UTC")
    assert response.status_code == 202, response.content
    assert (response.json()["events"], response.json()["duplicates"]) == (2, 0)
    assert [e.message for e in stored_events(org_a)] == ["failure", "again"]


def test_a_signed_in_analyst_may_import(client_a, org_a):
    mapping = json.dumps({"ts": "t", "metric": "m", "value": "v"})
    response = upload(client_a, b"t,m,v\n1781485200,a,1\n", "m.csv", format="csv", mapping=mapping)
    assert response.status_code == 202, response.content
    assert list(stored_series(org_a)) == [("a", ())]


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"format": "syslog", "timezone": "UTC"}, "year"),
        ({"format": "csv", "mapping": "{nope"}, "mapping"),
        ({"format": "csv", "mapping": '{"ts": "t"}'}, "mapping.value"),
        ({"format": "evtx"}, "format"),
    ],
)
def test_the_import_api_refuses_unusable_options_with_400(pusher_a, fields, text):
    response = upload(pusher_a, b"t,m,v\n1,a,1\n", "x.log", **fields)
    assert response.status_code == 400
    body = response.json()
    assert text in body["error"] + " ".join(e["field"] for e in body["errors"])
    assert IngestBatch.objects.count() == 0


def test_the_import_api_needs_a_token_or_an_analyst(anonymous, read_token_a):
    from tests.conftest import bearer_client

    assert upload(anonymous, b"x", "x.log", format="hpc").status_code in (401, 403)
    assert upload(bearer_client(read_token_a), b"x", "x.log", format="hpc").status_code == 403
