"""One label matcher with PromQL's meaning everywhere: the shared table of cases (matcher_cases.json)
checked against the Python matcher, grants in SQL and in Python (series and events), corrections,
PromQL over HTTP and (in tests/timeline/test_promql_compliance.py) Prometheus itself; RE2 patterns
rewritten for PostgreSQL accept exactly what RE2 accepts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from core.labels import SelectorError, check_regex, label_matches
from core.regex_sql import Untranslatable, to_postgres
from orgs.grants import GrantRule
from orgs.label_sql import label_q
from orgs.models import Grant
from orgs.services import grant_create
from tests.conftest import bearer_client
from tests.factories import T0, S, gauge, log_line, write
from timeline.models import Event, Series

TABLE = json.loads((Path(__file__).parent / "matcher_cases.json").read_text())
VALUES = TABLE["values"]
CASES = TABLE["cases"]
USABLE = [case for case in CASES if not case.get("refused")]
IN_SQL = [case for case in USABLE if case.get("sql", True)]


def case_id(case: dict) -> str:
    return f"{case['op']}{case['value']!r}"


def labels_of(value: str | None) -> dict:
    return {} if value is None else {"node": value}


def grant_text(case: dict) -> str:
    return f'{case["name"]}{case["op"]}"{case["value"]}"'


def promql_string(value: str) -> str:
    """``value`` as a PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def promql_selector(case: dict) -> str:
    return f"matcher_case{{{case['name']}{case['op']}{promql_string(case['value'])}}}"


@pytest.mark.parametrize("case", USABLE, ids=case_id)
def test_the_matcher_selects_what_the_table_says(case):
    selected = [v for v in VALUES if label_matches(labels_of(v), case["name"], case["op"], case["value"])]
    assert selected == [v for v in VALUES if v in case["selects"]]


@pytest.mark.parametrize("case", [c for c in CASES if c.get("refused")], ids=case_id)
def test_patterns_re2_refuses_are_refused_naming_the_field(case):
    with pytest.raises(SelectorError) as refused:
        check_regex(case["value"], "label_matchers")
    assert refused.value.field == "label_matchers"


@pytest.fixture
def table_data(org_b):
    """One series and one event of org_b per value of the table (a null value: no ``node`` label)."""
    series = [gauge("matcher_case", {"i": str(i), **labels_of(v)}, (1.0,)) for i, v in enumerate(VALUES)]
    events = [
        log_line(T0 + i * S, "x", resource={"i": str(i), **labels_of(v)}, signal="storage")
        for i, v in enumerate(VALUES)
    ]
    write(org_b, series=series, events=events, source="table")
    return org_b


def _selected(rows, field: str) -> list:
    found = {row.__dict__[field].get("node") for row in rows}
    return [v for v in VALUES if v in found]


@pytest.mark.parametrize("case", IN_SQL, ids=case_id)
def test_grants_select_the_table_in_sql_and_in_python(table_data, case):
    rule = GrantRule.from_grant(
        Grant(pk=1, owner=table_data, level="full", label_matchers=[grant_text(case)])
    )
    assert rule.usable
    wanted = [v for v in VALUES if v in case["selects"]]
    assert _selected(Series.unscoped.filter(rule.series_q()), "labels") == wanted
    assert _selected([s for s in Series.unscoped.all() if rule.matches_series(s)], "labels") == wanted
    assert _selected(Event.unscoped.filter(rule.event_q()), "resource") == wanted
    assert _selected([e for e in Event.unscoped.all() if rule.matches_event(e)], "resource") == wanted


@pytest.mark.parametrize("case", IN_SQL, ids=case_id)
def test_label_q_selects_the_table(table_data, case):
    q = label_q("labels", case["name"], case["op"], case["value"])
    wanted = [v for v in VALUES if v in case["selects"]]
    assert _selected(Series.unscoped.filter(q), "labels") == wanted


@pytest.mark.parametrize("case", [c for c in USABLE if not c.get("sql", True)], ids=case_id)
def test_a_grant_refuses_a_pattern_the_database_cannot_evaluate(org_a, org_b, case):
    with pytest.raises(ValidationError, match="label_matchers"):
        grant_create(owner=org_b, grantee=org_a, name="x", label_matchers=[grant_text(case)])


@pytest.mark.parametrize("case", [c for c in CASES if c.get("refused")], ids=case_id)
def test_a_grant_refuses_a_pattern_re2_refuses(org_a, org_b, case):
    with pytest.raises(ValidationError, match="label_matchers"):
        grant_create(owner=org_b, grantee=org_a, name="x", label_matchers=[grant_text(case)])


def test_a_stored_grant_with_a_backreference_shares_nothing(table_data):
    """Written before matchers were RE2's: Python's re read it, RE2 refuses it. The grant shares
    nothing (in SQL and in Python) rather than failing every read of its grantee."""
    rule = GrantRule.from_grant(
        Grant(pk=1, owner=table_data, level="full", label_matchers=['node=~"(a)\\1"'])
    )
    assert not rule.usable
    assert not Series.unscoped.filter(rule.series_q()).exists()
    assert not any(rule.matches_series(s) for s in Series.unscoped.all())


def test_promql_selects_the_table_over_http(table_data, read_token_b):
    client = bearer_client(read_token_b)
    for case in CASES:
        response = client.get(
            "/prometheus/api/v1/query", {"query": promql_selector(case), "time": T0 // S + 60}
        )
        if case.get("refused"):
            assert response.status_code == 400, case
            assert response.json()["errorType"] == "bad_data"
            continue
        assert response.status_code == 200, (case, response.content[:300])
        found = {row["metric"].get("node") for row in response.json()["data"]["result"]}
        assert [v for v in VALUES if v in found] == [v for v in VALUES if v in case["selects"]], case


@pytest.fixture
def read_token_b(org_b) -> str:
    from orgs.models import TokenPurpose
    from orgs.services import token_create

    return token_create(org=org_b, name="grafana", purpose=TokenPurpose.READ).secret


@pytest.mark.parametrize(
    "pattern", ["(?i)node.*", "a{1,1000}", "\\p{L}+", "(?P<x>a)", "(?i)NODE_.*|up", "node_[a-z]{2,300}"]
)
def test_metric_name_regexes_answer_like_prometheus(table_data, read_token_b, pattern):
    """Patterns PostgreSQL's own regular expressions refuse or read differently answered 500."""
    write(table_data, series=[gauge("node_load", {}, (1.0,)), gauge("Node_cpu", {}, (1.0,))], source="n")
    client = bearer_client(read_token_b)
    response = client.get("/prometheus/api/v1/series", {"match[]": f"{{__name__=~{promql_string(pattern)}}}"})
    assert response.status_code == 200, response.content[:300]
    names = sorted({row["__name__"] for row in response.json()["data"]})
    expected = sorted(
        name
        for name in ("matcher_case", "node_load", "Node_cpu")
        if label_matches({"n": name}, "n", "=~", pattern)
    )
    assert names == expected


# -- the rewriting for PostgreSQL ---------------------------------------------------------------------
ATOMS = ["a", "b", "A", ".", "\\d", "\\w", "\\s", "\\W", "[a-c]", "[^ab]", "[[:alpha:]]", "[[:^digit:]]"]
ATOMS += ["é", "É", "k", "K", "\u017f", "\n", "\\.", "-", "[\\]a]", "[a-]", "\\x{41}", "\\n"]
ATOMS += ["(?i:a)", "[\\d_]"]
ATOMS += ["\\Qa.\\E", "ß", "Σ", "\u03c3", "{", "}", "x{,2}", "$", "^", "\\A", "\\z", "[^\\n]"]
QUANTIFIERS = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,}", "*?", "{300}", "{2,300}"]
GROUPS = ["", "?:", "?P<n>", "?i:", "?s:", "?-s:"]
LETTERS = ["a", "b", "A", "1", "_", " ", "\n", "é", "É", "k", "K", "\u212a", "\u017f", "s", "S", "ß", "ẞ"]
LETTERS += ["Σ", "\u03c3", "ς", ".", "-", "]", "{", "}", "x", "€"]


def _pattern(rnd: random.Random, depth: int = 0) -> str:
    out = ""
    for _ in range(rnd.randint(1, 4)):
        if rnd.random() < 0.25 and depth < 3:
            atom = f"({rnd.choice(GROUPS)}{_pattern(rnd, depth + 1)}|{_pattern(rnd, depth + 1)})"
        else:
            atom = rnd.choice(ATOMS)
        out += atom + ("" if atom in ("$", "^", "\\A", "\\z") else rnd.choice(QUANTIFIERS))
    return ("(?i)" if rnd.random() < 0.15 else "") + out


@pytest.mark.django_db
def test_patterns_rewritten_for_postgresql_accept_what_re2_accepts():
    """Random RE2 patterns (case folding, classes, repetitions past 255, anchors, escapes) against
    random texts: the rewritten ARE and RE2 agree on every one."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL")
    from core.labels import PatternError, compile_regex

    rnd = random.Random(27)
    checked = 0
    with connection.cursor() as cursor:
        for _ in range(300):
            pattern = _pattern(rnd)
            try:
                regex = compile_regex(pattern)
                are = to_postgres(pattern)
            except (PatternError, Untranslatable):
                continue
            texts = [
                "".join(rnd.choice(LETTERS) for _ in range(rnd.choice([0, 1, 2, 3, 5, 300])))
                for _ in range(20)
            ]
            cursor.execute(
                "SELECT t ~ %s FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n", [are, texts]
            )
            for text, (found,) in zip(texts, cursor.fetchall(), strict=True):
                assert found == (regex.fullmatch(text) is not None), (pattern, are, text)
                checked += 1
    assert checked > 3000


# -- lanes and clock corrections ----------------------------------------------------------------------
LANE_CASES = [c for c in USABLE if c["op"] == "=" and not set(c["value"]) & set("{},=@!")]


@pytest.mark.parametrize("case", LANE_CASES, ids=case_id)
def test_lane_filters_select_the_table(table_data, case):
    from tests.factories import own_scope
    from timeline.lanes import LaneSpec, select_members

    spec = LaneSpec.parse(f"line:{table_data.slug}/storage/matcher_case{{node={case['value']}}}")
    members = select_members(own_scope(table_data), spec)
    found = {m.series.labels.get("node") for m in members}
    assert [v for v in VALUES if v in found] == [v for v in VALUES if v in case["selects"]]


def test_a_lane_filter_does_not_read_a_missing_label_as_the_text_none(table_data):
    from tests.factories import own_scope
    from timeline.lanes import LaneSpec, select_members

    spec = LaneSpec.parse(f"line:{table_data.slug}/storage/matcher_case{{node=None}}")
    assert select_members(own_scope(table_data), spec) == []


@pytest.mark.parametrize("case", IN_SQL, ids=case_id)
def test_clock_corrections_select_the_table_in_sql_and_in_python(table_data, case):
    from store.hints import Correction

    correction = Correction(
        id=1,
        org_id=table_data.pk,
        source_id=None,
        matcher=(case["name"], case["op"], case["value"]),
        offset_us=1,
        drift_us_per_hour=0,
        reference_us=0,
        valid_from=None,
        valid_to=None,
    )
    wanted = [v for v in VALUES if v in case["selects"]]
    assert _selected(Series.unscoped.filter(correction.q("labels")), "labels") == wanted
    in_python = [s for s in Series.unscoped.all() if correction.matches(s.org_id, s.source_id, s.labels)]
    assert _selected(in_python, "labels") == wanted
    assert _selected(Event.unscoped.filter(correction.q("resource")), "resource") == wanted


def test_a_stored_correction_refused_now_is_left_out_and_reads_still_answer(table_data, client_b):
    from clock.model import resolve_clock
    from tests.factories import own_scope
    from timeline.models import ClockCorrection

    ClockCorrection.objects.create(org=table_data, label_matcher='node=~"(a)\\1"', offset_us=5_000_000)
    ClockCorrection.objects.create(org=table_data, label_matcher='node=~"\\p{L}+"', offset_us=5_000_000)
    assert resolve_clock(own_scope(table_data)).corrections == ()
    response = client_b.get(
        "/timeline/api/events", {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T01:00:00Z"}
    )
    assert response.status_code == 200


@pytest.mark.parametrize("pattern", ["(a*)*b", "(.*a){20}", "((a+)+)+b"])
def test_a_grant_with_a_catastrophic_pattern_selects_in_bounded_time(org_b, pattern):
    """On SQLite too: Django's REGEXP there is Python's backtracking re; the grant's lookup is RE2."""
    import time

    write(org_b, series=[gauge("m", {"node": "a" * 1000 + str(i)}, (1.0,)) for i in range(5)], source="s")
    rule = GrantRule.from_grant(Grant(pk=1, owner=org_b, level="full", label_matchers=[f'node=~"{pattern}"']))
    started = time.monotonic()
    in_sql = list(Series.unscoped.filter(rule.series_q()))
    in_python = [s for s in Series.unscoped.all() if rule.matches_series(s)]
    assert time.monotonic() - started < 2.0
    assert in_sql == in_python == []


@pytest.mark.parametrize("case", [c for c in USABLE if c["op"] == "="], ids=case_id)
def test_series_and_event_searches_select_the_table(table_data, client_b, case):
    label = f"{case['name']}={case['value']}"
    series = client_b.get("/api/v1/series", {"label": label, "metric": "matcher_case"}).json()["series"]
    window = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T01:00:00Z", "label": label}
    events = client_b.get("/timeline/api/events", window).json()["events"]
    wanted = [v for v in VALUES if v in case["selects"]]
    for found in ({s["labels"].get("node") for s in series}, {e["resource"].get("node") for e in events}):
        assert [v for v in VALUES if v in found] == wanted
