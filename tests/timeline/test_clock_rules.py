"""The clock rules are data: clock/rules.json as shipped, a deployment's file
(``JOINTLINE_CLOCK_RULES_FILE``) replacing sections of it, and a bad file named with the field and
the reason."""

from __future__ import annotations

import json
import os
import re

import pytest

from clock import anchors
from clock.rules import ClockRulesError, clock_rules

S = 1_000_000
T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z


def stamp(org: str, signal: str, name: str, ts: int, **keys: str) -> anchors.Stamp:
    return anchors.Stamp(org, "agent", signal, name, ts, keys)


def test_the_shipped_rules_describe_the_reference_agents(settings):
    settings.JOINTLINE_CLOCK_RULES_FILE = ""
    rules = clock_rules()
    assert rules.reference_orgs == ("infra",)
    assert rules.restart_events == ("boot",)
    by_name = {rule.name: rule for rule in rules.anchor_rules}
    assert set(by_name) == {"launch_to_rank", "session_to_job_stats", "session_to_rank", "xid_to_failure"}
    assert by_name["session_to_rank"].max_delay_us == 900 * S and not by_name["session_to_rank"].estimate
    xid = by_name["xid_to_failure"]
    assert xid.pick == "nearest" and xid.join == (("node", "culprit"),)
    assert by_name["launch_to_rank"].max_delay_us == S and by_name["launch_to_rank"].estimate
    (pair,) = rules.signal_pairs
    assert pair.node_labels == {"device": "ens2f0"} and pair.fleet_org == "storage"


def test_a_deployment_names_its_own_anchor_events_in_a_file(tmp_path, settings):
    own = tmp_path / "clock.json"
    own.write_text(
        json.dumps(
            {
                "reference_orgs": ["hpc"],
                "anchor_rules": [
                    {
                        "name": "dispatch_to_worker",
                        "earlier": ["scheduler", "dispatched"],
                        "later": ["application", "worker_up"],
                        "join": [["host", "hostname"]],
                        "max_delay_s": 0.5,
                    }
                ],
            }
        )
    )
    settings.JOINTLINE_CLOCK_RULES_FILE = str(own)
    rules = clock_rules()
    assert rules.reference_orgs == ("hpc",)
    assert rules.restart_events == ("boot",)  # a section the file does not hold stays as shipped
    stamps = [
        stamp("hpc", "scheduler", "dispatched", T0, host="n1"),
        stamp("lab", "application", "worker_up", T0 + 2 * S + 100_000, hostname="n1"),
        stamp("lab", "application", "rank_start", T0 + 100_000, node="n1", session="s"),
    ]
    (pair,) = anchors.anchor_pairs(
        stamps, clock_rules().anchor_rules
    )  # the rules in force: the file's, not the shipped ones
    assert pair.rule.name == "dispatch_to_worker" and pair.diff_us == 2 * S + 100_000
    assert pair.violation_us == 0


def test_a_changed_file_is_read_again(tmp_path, settings):
    own = tmp_path / "clock.json"
    own.write_text(json.dumps({"reference_orgs": ["a"]}))
    settings.JOINTLINE_CLOCK_RULES_FILE = str(own)
    assert clock_rules().reference_orgs == ("a",)
    own.write_text(json.dumps({"reference_orgs": ["b", "c"]}))
    stat = own.stat()
    os.utime(own, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert clock_rules().reference_orgs == ("b", "c")


RULE = {"name": "x", "earlier": ["a", "b"], "later": ["b", "c"], "join": [["n", "n"]]}


def rule_file(**changes) -> str:
    return json.dumps({"anchor_rules": [{**RULE, **changes}]})


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("not json", "cannot be read"),
        ("[]", "must hold a JSON object"),
        ('{"anchors": []}', "anchors: unknown section"),
        ('{"reference_orgs": "infra"}', "reference_orgs: must be a list of names"),
        ('{"anchor_rules": [{"name": "x"}]}', "anchor_rules[0].earlier: missing"),
        (rule_file(earlier=["a"]), "anchor_rules[0].earlier: must be [signal, event name]"),
        (rule_file(join=[]), "anchor_rules[0].join: must pair at least one key"),
        (rule_file(join=[["n"]]), "anchor_rules[0].join[0]: must be [key, key]"),
        (rule_file(max_delay_s=-1), "anchor_rules[0].max_delay_s: must be a number of seconds"),
        (rule_file(min_delay_s=5, max_delay_s=2), "max_delay_s: must not be below min_delay_s"),
        (rule_file(pick="last"), "anchor_rules[0].pick: must be first or nearest"),
        (rule_file(delay=3), "anchor_rules[0].delay: unknown key"),
        ('{"signal_pairs": [{"name": "p"}]}', "signal_pairs[0].node_org: missing"),
    ],
)
def test_a_bad_rules_file_is_named_with_the_field_and_the_reason(tmp_path, settings, content, named):
    own = tmp_path / "clock.json"
    own.write_text(content)
    settings.JOINTLINE_CLOCK_RULES_FILE = str(own)
    with pytest.raises(ClockRulesError, match=re.escape(named)) as raised:
        clock_rules()
    assert "clock.json" in str(raised.value)


def test_a_missing_rules_file_is_named(tmp_path, settings):
    settings.JOINTLINE_CLOCK_RULES_FILE = str(tmp_path / "absent.json")
    with pytest.raises(ClockRulesError, match=r"absent\.json"):
        clock_rules()
