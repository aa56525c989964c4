"""The signal normaliser: the default table, user extensions, name rules and XID events."""

import json

import pytest
from django.test import override_settings

from ingest import signals
from ingest.signals import DEFAULT_MAP, SignalMap, SignalMapError


@pytest.mark.parametrize(
    ("metric", "signal"),
    [
        ("node_network_receive_bytes_total", "network"),
        ("node_netstat_Tcp_RetransSegs", "network"),
        ("node_disk_read_bytes_total", "host"),
        ("node_load1", "host"),
        ("node_mountstats_nfs_operations_requests_total", "storage"),
        ("node_nfs_rpcs_total", "storage"),
        ("DCGM_FI_DEV_GPU_TEMP", "gpu"),
        ("DCGM_FI_DEV_XID_ERRORS", "gpu"),
        ("slurm_jobs_running", "scheduler"),
        ("my_app_requests_total", "other"),
    ],
)
def test_the_default_table_assigns_metric_families_to_lanes(metric, signal):
    assert DEFAULT_MAP.metric(metric).signal == signal


@pytest.mark.parametrize(
    ("families", "signal"),
    [
        (("RAS KERNEL",), "host"),
        (("slurmctld",), "scheduler"),
        (("pod.running",), "scheduler"),
        (("x", "xid"), "gpu"),
    ],
)
def test_the_default_table_assigns_event_families_to_lanes(families, signal):
    assert DEFAULT_MAP.event_signal(*families) == signal


def test_unknown_families_are_other():
    assert DEFAULT_MAP.event_signal("trainer", None) == "other"
    assert DEFAULT_MAP.metric("trainer_tokens_total").signal == "other"


def test_the_xid_metric_is_a_gauge_that_also_makes_events():
    rule = DEFAULT_MAP.metric("DCGM_FI_DEV_XID_ERRORS")
    assert (rule.kind, rule.xid_events) == ("gauge", True)


def test_a_user_map_file_extends_and_overrides_the_defaults(tmp_path):
    path = tmp_path / "signals.json"
    table = {
        "metrics": [
            {"match": "trainer_*", "signal": "application", "kind": "counter", "unit": "tokens"},
            {"match": "node_disk_*", "signal": "storage"},
        ],
        "events": [{"match": "trainer*", "signal": "application"}],
    }
    path.write_text(json.dumps(table))
    with override_settings(JOINTLINE_SIGNAL_MAP_FILE=str(path)):
        configured = signals.configured_map()
    assert configured.metric("trainer_tokens").signal == "application"
    assert signals.metric_kind(configured.metric("trainer_tokens"), "trainer_tokens") == "counter"
    assert configured.metric("node_disk_read_bytes_total").signal == "storage"
    assert configured.metric("node_network_receive_bytes_total").signal == "network"
    assert configured.event_signal("Trainer-rank-0") == "application"


def test_without_a_map_file_the_defaults_apply():
    assert signals.configured_map() is DEFAULT_MAP


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ({"metrics": [{"match": "x", "signal": "disks"}]}, "signal"),
        ({"metrics": [{"match": "", "signal": "host"}]}, "match"),
        ({"metrics": [{"match": "x", "signal": "host", "kind": "histogram"}]}, "kind"),
        ({"events": [{"match": "x", "signal": "host", "colour": "red"}]}, "unknown field"),
        ({"rules": []}, "'metrics' and/or 'events'"),
        ({"metrics": {"match": "x"}}, "list"),
    ],
)
def test_a_bad_map_is_refused_naming_the_rule(table, reason):
    with pytest.raises(SignalMapError, match=reason):
        SignalMap.from_table(table, where="signals.json")


def test_an_unreadable_map_file_is_refused(tmp_path):
    path = tmp_path / "signals.json"
    path.write_text("{not json")
    with pytest.raises(SignalMapError, match="cannot be read"):
        signals.load_map_file(path)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("host.name", "host_name"),
        ("http.route", "http_route"),
        ("1abc", "key_1abc"),
        ("__x", "_x"),
        ("ok", "ok"),
    ],
)
def test_label_names_become_prometheus_valid(name, expected):
    assert signals.label_name(name) == expected


def test_metric_names_become_prometheus_valid():
    assert signals.metric_name("system.network.io") == "system_network_io"
    assert signals.metric_name("2xx.count") == "_2xx_count"


@pytest.mark.parametrize(
    ("metric", "kind"),
    [("a_total", "counter"), ("h_bucket", "counter"), ("s_count", "counter"), ("load", "gauge")],
)
def test_the_name_suggests_a_kind_when_nothing_declares_one(metric, kind):
    assert signals.kind_from_name(metric) == kind


def test_xid_events_are_made_on_each_change_of_a_nonzero_value():
    events = signals.xid_events(
        "DCGM_FI_DEV_XID_ERRORS",
        {"gpu": "2", "Hostname": "node-9"},
        [1, 2, 3, 4, 5],
        [0.0, 79.0, 79.0, 0.0, 48.0],
    )
    assert [(event.ts, event.attributes["xid"]) for event in events] == [(2, 79), (5, 48)]
    assert events[0].message == "XID 79 on GPU 2"
    assert events[0].resource == {"gpu": "2", "Hostname": "node-9"}
