"""Catastrophic regular expressions cannot stall a reader: patterns that take a backtracking engine
exponential time (``(a*)*b``, ``(.*a){20}``, nested quantifiers) against long label values, sent
through every place a user's pattern meets data — a grant's label matcher, a lane spec, a PromQL
selector, the series search and the event search — are answered in bounded time or refused with a
400, while another organisation's reads on the same two gunicorn workers stay under a second."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from orgs.models import TokenPurpose
from orgs.services import grant_create, organization_create, token_create
from tests.factories import T0, S, gauge, log_line, write
from tests.processes import gunicorn_server

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

LONG = "a" * 1000  # the longest label value a push accepts is 1,024 characters
CATASTROPHIC = ["(a*)*b", "(.*a){20}", "((a+)+)+b", "(a|aa)+b", "(.*.*)*b", "([a-z]+)*[0-9]"]
WINDOW = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T02:00:00Z"}
ATTACKS_PER_URL = 3
# A sent pattern is answered (or refused) within this; Python's re would take years on (a*)*b.
ANSWER_S = 5.0
OTHER_READ_S = 1.0


def _get(port: int, path: str, token: str, params: dict) -> tuple[int, float]:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params, doseq=True)}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    return status, time.monotonic() - started


@pytest.fixture
def gunicorn(tmp_path):
    """A gunicorn of two workers against the test database; yields its port."""
    with gunicorn_server(tmp_path, workers=2) as (port, _server, _log):
        yield port


@pytest.fixture
def cast():
    """storage owns series and events with long label values and shares them with attacker through a
    grant whose label matcher is catastrophic for a backtracking engine; bystander reads its own."""
    storage, _ = organization_create(slug="storage", name="Storage")
    attacker, _ = organization_create(slug="attacker", name="Attacker")
    bystander, _ = organization_create(slug="bystander", name="Bystander")
    series = [
        gauge("nfs_read_latency_seconds", {"node": LONG + str(i), "pat": LONG}, (1.0, 2.0)) for i in range(20)
    ]
    events = [
        log_line(T0 + i * S, "slow", resource={"node": LONG + str(i)}, signal="storage") for i in range(20)
    ]
    write(storage, series=series, events=events, source="array")
    write(bystander, series=[gauge("bystander_up", {"node": "b-1"}, (1.0, 1.0))], source="b")
    grant_create(owner=storage, grantee=attacker, name="nodes", label_matchers=['node=~"(a*)*b|(.*a){20}.*"'])
    read = TokenPurpose.READ
    return (
        token_create(org=attacker, name="grafana", purpose=read).secret,
        token_create(org=bystander, name="grafana", purpose=read).secret,
    )


def _attacks() -> list[tuple[str, dict]]:
    """Every entry point, with every catastrophic pattern."""
    calls = []
    for pattern in CATASTROPHIC:
        quoted = pattern.replace("\\", "\\\\")
        calls += [
            ("/prometheus/api/v1/query", {"query": f'{{pat=~"{quoted}"}}', "time": T0 // S + 30}),
            (
                "/prometheus/api/v1/query",
                {"query": f'nfs_read_latency_seconds{{node!~"{quoted}"}}', "time": T0 // S},
            ),
            ("/prometheus/api/v1/series", {"match[]": f'{{__name__=~"{quoted}"}}'}),
            ("/prometheus/api/v1/query", {"query": f'label_replace(up, "x", "$1", "pat", "{quoted}")'}),
            ("/api/v1/series", {"label": [f"node={pattern}", f"pat={pattern}"]}),
            ("/timeline/api/events", {**WINDOW, "label": f"node={pattern}", "q": pattern}),
            (
                "/timeline/api/lanes",
                {**WINDOW, "lane": f"band:storage/storage/nfs_read_latency_seconds{{node={pattern}}}"},
            ),
        ]
    # the grant's own matcher is evaluated on every read of the grantee
    calls += [
        ("/api/v1/series", {}),
        ("/prometheus/api/v1/query", {"query": "nfs_read_latency_seconds", "time": T0 // S}),
        ("/timeline/api/events", WINDOW),
    ]
    return calls


def test_catastrophic_patterns_answer_in_bounded_time_and_another_client_keeps_reading(gunicorn, cast):
    port = gunicorn
    attacker, bystander = cast
    answers: list[tuple[str, int, float]] = []
    reads: list[tuple[int, float]] = []
    done = threading.Event()

    def attack(calls: list[tuple[str, dict]]) -> None:
        for _ in range(ATTACKS_PER_URL):
            for path, params in calls:
                status, took = _get(port, path, attacker, params)
                answers.append((f"{path} {params}", status, took))

    def read() -> None:
        while not done.is_set():
            reads.append(
                _get(port, "/prometheus/api/v1/query", bystander, {"query": "bystander_up", "time": T0 // S})
            )
            time.sleep(0.05)

    calls = _attacks()
    # both workers answer a first PromQL query and war-room read before the clock starts (imports, caches)
    for _ in range(4):
        _get(port, "/prometheus/api/v1/query", bystander, {"query": "bystander_up", "time": T0 // S})
        _get(port, "/timeline/api/events", attacker, WINDOW)
    attackers = [threading.Thread(target=attack, args=(calls[part::2],)) for part in range(2)]
    reader = threading.Thread(target=read)
    reader.start()
    for thread in attackers:
        thread.start()
    for thread in attackers:
        thread.join(timeout=600)
    done.set()
    reader.join(timeout=60)
    assert not any(thread.is_alive() for thread in attackers), "an attack did not finish"
    slow = [(what, status, round(took, 2)) for what, status, took in answers if took > ANSWER_S]
    assert not slow, slow[:5]
    assert {status for _, status, _ in answers} <= {200, 400}, [a for a in answers if a[1] not in (200, 400)][
        :5
    ]
    assert len(answers) == ATTACKS_PER_URL * len(calls)
    assert reads and all(status == 200 for status, _ in reads)
    worst = max(took for _, took in reads)
    print(
        f"regex bounds: {len(answers)} catastrophic requests, slowest {max(t for *_, t in answers):.2f} s; "
        f"{len(reads)} reads of another organisation meanwhile, worst {worst:.3f} s"
    )
    assert worst < OTHER_READ_S
