"""No organisation reads another's unshared data through any URL.

Organisation A (``storage``) plants canaries in its data. Then each member of the
cast requests every URL the project exposes — found by walking the URL
resolver, so a new endpoint is covered the day it is added, with its
parameters filled from real objects of A — and the test checks every body,
header and status against what that viewer's grant allows:

* B (``infra``) has a ``full`` grant on A's ``nfs_*`` series and storage events;
* C (``modeldev``) has a ``redacted`` grant on all of A's storage data;
* D (``gpuvendor``) has an ``aggregate`` grant on A's ``nfs_*`` series;
* E (``cloudops``) has no grant; its read token reads with E's scope, as do read tokens of C and D;
* A's push token, and an anonymous visitor.

A also keeps application series and events it shares with nobody, with canaries in their metric names,
label names, label values and event names (:data:`UNSHARED_FRAGMENTS`), and publishes a description of
them whose private selector names them too: no viewer but A may see any part of those names, in any
spelling (a prefix, a word, URL- or HTML-escaped), while every organisation's placeholders still say
that A keeps application data it does not share, how much, A's own description, and whom to ask.

A's permalinks name lanes by series id and by lane spec (every lane kind, the canary metric name and
label values in the specs, a capacity and a label filter on events): each viewer opens them as the war
room does, through ``/api/v1/permalinks/<id>``, ``/i/<id>`` and the lanes, events and catalogue APIs
the page then calls with what the redirect gave it, and freezes them into snapshots. An incident of A's
with every other organisation as participant carries the same lanes into their exports (JSON, CSV and
the HTML report).

The main run uses the configured database (PostgreSQL in CI); :func:`test_the_leak_test_passes_on_sqlite`
runs this module again on the embedded SQLite backend.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from clock.model import ALL_STORED_TIME
from core.records import Batch, SeriesBlock
from incidents import services as timeline_services
from ingest.protocols.topology import parse_topology
from ingest.services import batch_accept
from ingest.topology import topology_replace
from orgs.access import Scope
from orgs.discovery import description_create, disclosure_set
from orgs.models import AccessRequest, DetectorRun
from orgs.services import access_request_create, grant_create, token_create
from store import EventMatch, get_store
from tests.conftest import bearer_client
from tests.factories import (
    FIRST_SIX_HOURS,
    T0,
    S,
    gauge,
    log_line,
    member_client,
    organizations,
    snapshotted_link,
    write,
)
from tests.invitations import accept_invitations
from tests.processes import pytest_in_subprocess
from timeline.lanes import LaneSpec, LaneSpecError
from timeline.models import Series

WINDOW = "from=2026-06-15T00:00:00Z&to=2026-06-15T06:00:00Z"
T0_TEXT, T1_TEXT = "2026-06-15T00:00:00Z", "2026-06-15T06:00:00Z"

SECRET_METRIC = "canary_secret_metric"
SECRET_LABEL = "canarylabel-secret"
SHARED_LABEL = "canarylabel-shared"
LOG_BODY = "canarybody-app"
LOG_ATTRIBUTE = "canaryattr-app"
LOG_NODE = "canarynode-app"
INCIDENT_TITLE = "canarytitle-incident"
ANNOTATION_TEXT = "canarytext-annotation"
NOTE_TEXT = "canarytext-note"
ACCESS_REASON = "canaryreason-request"
# A's pushed topology: a service whose name the redacted grantee may read, on nodes whose names it may
# read only as pseudonyms (its grant masks ``node``).
TOPOLOGY_SERVICE = "canaryservice-topology"

# Series and events of A that no grant covers: canaries in metric and event names, label names and values.
UNSHARED_METRIC = "acme_secret_project_loss"
UNSHARED_GAUGE = "acme_secret_project_backlog"
UNSHARED_LABEL_NAME = "customer_ledger"
UNSHARED_LABEL_VALUE = "db-prod-payments-7"
UNSHARED_EVENT = "acme_payroll_batch"
# Any of these, in any spelling, is part of a name A keeps to itself.
UNSHARED_FRAGMENTS = (
    "acme",
    "secret_project",
    "project_loss",
    "project_backlog",
    "customer_ledger",
    "ledger",
    "db_prod",
    "payments",
    "payroll",
)
# A's description of them, in its own words: every viewer with a placeholder may read these.
DESCRIPTION_NAME = "Finance workload"
DESCRIPTION_TEXT = "Loss and backlog of a batch workload, per database."

# Lanes of a permalink, by spec: every lane kind, with the canaries in metric names and label values.
LANE_SPECS = [
    f"line:storage/application/{UNSHARED_METRIC}{{node={UNSHARED_LABEL_VALUE}}}",
    f"band:storage/application/{UNSHARED_GAUGE}",
    f"logs:storage/application/{UNSHARED_EVENT}{{node={UNSHARED_LABEL_VALUE}}}",
    f"line:storage/storage/{SECRET_METRIC}{{node={SECRET_LABEL}}}",
    f"rate:storage/storage/{SECRET_METRIC}{{node={SECRET_LABEL}}}!pin",
    f"band:storage/storage/nfs_rpc_slots_in_use{{tenant={SHARED_LABEL}}}!nodes",
    f"heatmap:storage/storage/nfs_rpc_slots_in_use{{tenant={SHARED_LABEL}}}",
    f"sum:storage/storage/nfs_rpc_slots_in_use{{tenant={SHARED_LABEL}}}@{SECRET_METRIC}",
    f"sum:storage/storage/{SECRET_METRIC}@nfs_rpc_slots_in_use",
    "band:storage/storage/nfs_rpc_slots_in_use",
    f"spans:storage/storage{{node={LOG_NODE}}}!by=node",
    f"logs:storage/storage/mds{{node={LOG_NODE}}}",
]
# What each viewer may see of the canaries (anything else is a leak).
ALLOWED: dict[str, set[str]] = {
    "owner": {
        SECRET_METRIC,
        SECRET_LABEL,
        SHARED_LABEL,
        LOG_BODY,
        LOG_ATTRIBUTE,
        LOG_NODE,
        INCIDENT_TITLE,
        ANNOTATION_TEXT,
        NOTE_TEXT,
        ACCESS_REASON,
        TOPOLOGY_SERVICE,
    },
    "full": {SHARED_LABEL, LOG_BODY, LOG_ATTRIBUTE, LOG_NODE, ACCESS_REASON},
    # metric names are shared; labels are pseudonymised, in the topology too (its grant covers it)
    "redacted": {SECRET_METRIC, TOPOLOGY_SERVICE},
    "aggregate": set(),
    "none": set(),
    "read_token_none": set(),
    "read_token_redacted": {SECRET_METRIC, TOPOLOGY_SERVICE},
    "read_token_aggregate": set(),
    "push_token": set(),
    "anonymous": set(),
}
# The viewers that see A's placeholders (every signed-in member of another organisation).
PLACEHOLDER_VIEWERS = ("full", "redacted", "aggregate", "none")
CANARIES = set().union(*ALLOWED.values())


@dataclass
class World:
    clients: dict[str, APIClient]
    fillers: dict[str, list[str]]
    owner_objects: dict[str, object]


def _series(metric: str, node: str, extra: dict | None = None) -> SeriesBlock:
    return gauge(metric, {"node": node, **(extra or {})}, [i % 7 for i in range(30)], step_s=60)


@pytest.fixture
def world(db) -> World:
    orgs = organizations("storage", "infra", "modeldev", "gpuvendor", "cloudops")
    owner = orgs["storage"]
    blocks = [_series("nfs_rpc_slots_in_use", f"node-0{i}", {"tenant": SHARED_LABEL}) for i in range(1, 7)]
    blocks.append(_series(SECRET_METRIC, SECRET_LABEL))
    blocks += _unshared_series()
    event = log_line(
        T0 + 90 * S,
        LOG_BODY,
        node=LOG_NODE,
        signal="storage",
        name="mds",
        severity="error",
        attributes={"client": LOG_ATTRIBUTE},
    )
    write(owner, series=blocks, events=[event, _unshared_event()], source="array")
    journal = batch_accept(org=owner, batch=Batch(source="array", series=blocks[:1]))
    grant_create(
        owner=owner, grantee=orgs["infra"], name="nfs", signals=["storage"], name_patterns=["nfs_*", "mds"]
    )
    grant_create(
        owner=owner,
        grantee=orgs["modeldev"],
        name="storage, redacted",
        level="redacted",
        signals=["storage"],
        masked_labels=["node", "tenant"],
    )
    grant_create(
        owner=owner, grantee=orgs["gpuvendor"], name="nfs fleet", level="aggregate", name_patterns=["nfs_*"]
    )
    private_grant = grant_create(
        owner=owner, grantee=orgs["infra"], name="second", signals=["storage"], name_patterns=["nfs_*"]
    )

    clients = {
        "owner": member_client(owner, "olga"),
        "full": member_client(orgs["infra"], "ivan"),
        "redacted": member_client(orgs["modeldev"], "maya"),
        "aggregate": member_client(orgs["gpuvendor"], "gina"),
        "none": member_client(orgs["cloudops"], "carl"),
        "read_token_none": bearer_client(
            token_create(org=orgs["cloudops"], name="ro", purpose="read").secret
        ),
        "read_token_redacted": bearer_client(
            token_create(org=orgs["modeldev"], name="ro", purpose="read").secret
        ),
        "read_token_aggregate": bearer_client(
            token_create(org=orgs["gpuvendor"], name="ro", purpose="read").secret
        ),
        "push_token": bearer_client(token_create(org=owner, name="agent").secret),
        "anonymous": APIClient(),
    }
    owner_user = clients["owner"].user
    topology_replace(
        org=owner,
        document=parse_topology(
            json.dumps(
                {
                    "source": "cmdb",
                    "signal": "storage",
                    "entities": [{"kind": "storage_service", "name": TOPOLOGY_SERVICE, "series": ["nfs_*"]}],
                    "edges": [
                        {"from": f"node/{node}", "to": f"storage_service/{TOPOLOGY_SERVICE}"}
                        for node in (LOG_NODE, SECRET_LABEL, UNSHARED_LABEL_VALUE)
                    ],
                }
            ).encode()
        ),
    )
    incident = timeline_services.incident_create(
        user=owner_user, title=INCIDENT_TITLE, window_start=T0, window_end=T0 + 3600 * S, lanes=[]
    )
    annotation = timeline_services.annotation_create(
        incident=incident, user=owner_user, ts=T0, text=ANNOTATION_TEXT
    )
    timeline_services.note_add(incident=incident, user=owner_user, text=NOTE_TEXT)
    permalink, snapshot = snapshotted_link(owner_user, incident)
    # What A lets others learn of the data it shares with nobody: the counts and its own description,
    # whose selector names the canaries.
    disclosure_set(user=owner_user, level="described")
    description = description_create(
        user=owner_user,
        name=DESCRIPTION_NAME,
        text=DESCRIPTION_TEXT,
        signals=["application"],
        name_patterns=["acme_*"],
    )
    unshared_ids = list(Series.unscoped.filter(org=owner, signal="application").values_list("pk", flat=True))
    joint = timeline_services.incident_create(
        user=owner_user,
        title="joint review",
        window_start=T0,
        window_end=T0 + 3600 * S,
        participants=["infra", "modeldev", "gpuvendor", "cloudops"],
        lanes=[*LANE_SPECS, *unshared_ids],
    )
    accept_invitations(joint.pk)  # each invited organisation takes part
    found = get_store().select_events(Scope.system(), ALL_STORED_TIME, match=EventMatch(text=LOG_BODY))
    (event_id,) = [event.pk for event in found if event.message == LOG_BODY]
    spec_links = [
        timeline_services.permalink_create(
            user=owner_user,
            state={**FIRST_SIX_HOURS, "lanes": LANE_SPECS},
            incident=incident,
        ),
        timeline_services.permalink_create(
            user=owner_user,
            state={
                **FIRST_SIX_HOURS,
                "lanes": LANE_SPECS,
                "q": LOG_BODY,
                "ev_text": LOG_ATTRIBUTE,
                "sel": event_id,
            },
        ),
    ]
    access_request = access_request_create(
        requester_user=clients["full"].user, owner=owner, reason=ACCESS_REASON, signals=["storage"]
    )
    # A run of the owner's detector over a past window, whose error names a canary: only its
    # organisation may see it.
    detector_run = DetectorRun.objects.create(
        org=owner,
        requested_by=owner_user,
        start=1781481600 * 1_000_000,
        end=1781503200 * 1_000_000,
        status=DetectorRun.Status.FAILED,
        error=f"stopped at {LOG_BODY}",
    )
    fillers = {
        "run_id": [str(detector_run.pk)],
        "incident_id": [str(incident.pk), str(joint.pk)],
        "description_id": [str(description.pk)],
        "invitation_id": [str(pk) for pk in joint.invitations.values_list("pk", flat=True)],
        "annotation_id": [str(annotation.pk)],
        "short_id": [permalink.short_id, *(link.short_id for link in spec_links)],
        "snapshot_id": [str(snapshot.pk)],
        "grant_id": [str(private_grant.pk)],
        "request_id": [str(access_request.pk)],
        "batch_id": [str(journal.batch.pk)],
        "fmt": ["json", "csv", "html"],
        "name": ["node", "__name__", "jl_org"],
    }
    series_ids = Series.unscoped.filter(org=owner).values_list("pk", flat=True)
    queries = {"lanes": f"{WINDOW}&series={','.join(map(str, series_ids))}", "events": WINDOW}
    # The Prometheus API (promql/): every series, and what aggregations tell of names and labels.
    promql = [
        urlencode({"query": query, "match[]": '{__name__=~".+"}'})
        for query in (
            '{__name__=~".+"}',
            'count by (__name__) ({jl_org="storage"})',
            'count by (node) ({__name__=~".+"})',
            'group by (__name__, node) ({__name__=~"a.+"})',
        )
    ]
    queries["query"] = [f"{every}&time=1781485200" for every in promql]
    queries["query-range"] = [f"{every}&start=1781481600&end=1781503200&step=60" for every in promql]
    shared_lane = "band:storage/storage/nfs_rpc_slots_in_use"
    queries["analysis-selection"] = f"{WINDOW}&{urlencode({'lane': shared_lane})}"
    queries["analysis-lag"] = f"{WINDOW}&{urlencode({'a': shared_lane, 'b': shared_lane})}"
    return World(
        clients=clients,
        fillers=fillers,
        owner_objects={
            "queries": queries,
            "access_request": access_request,
            "incident": incident,
            "spec_links": spec_links,
            "joint": joint,
        },
    )


def _unshared_series() -> list[SeriesBlock]:
    """A's series that no grant covers: a per-node counter and a fleet-level gauge of the application
    signal, both moving in the window (a ranking would put them first)."""
    labels = {"node": UNSHARED_LABEL_VALUE, UNSHARED_LABEL_NAME: "acme-q3-close"}
    return [
        gauge(UNSHARED_METRIC, labels, [i * i for i in range(30)], step_s=60, signal="application"),
        gauge(
            UNSHARED_GAUGE,
            {UNSHARED_LABEL_NAME: UNSHARED_LABEL_VALUE},
            [0] * 15 + [900] * 15,
            step_s=60,
            signal="application",
        ),
    ]


def _unshared_event():
    return log_line(
        T0 + 120 * S,
        "ledger close stalled",
        node=UNSHARED_LABEL_VALUE,
        signal="application",
        name=UNSHARED_EVENT,
        severity="error",
        attributes={UNSHARED_LABEL_NAME: UNSHARED_LABEL_VALUE},
    )


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), f"{namespace}{entry.name or ''}"


def _urls(world: World) -> list[tuple[str, str]]:
    urls = []
    for route, name in _walk(get_resolver().url_patterns):
        if route.startswith("^") or "static" in route:
            continue
        params = re.findall(r"<(?:\w+:)?(\w+)>", route)
        missing = [p for p in params if p not in world.fillers]
        assert not missing, f"the leak test needs a value for {missing} in {route!r}: add it to the fillers"
        variants = [route]
        for param in params:
            variants = [
                re.sub(rf"<(?:\w+:)?{param}>", value, variant)
                for variant in variants
                for value in world.fillers[param]
            ]
        short = name.split(":")[-1]
        queries = world.owner_objects["queries"].get(short, WINDOW)
        for query in [queries] if isinstance(queries, str) else queries:
            urls += [("/" + variant + ("?" + query if query else ""), name) for variant in variants]
    return urls


def _spellings(text: str) -> str:
    """``text`` as it is, URL-decoded and HTML-unescaped, each lower-cased with every run of other
    characters than letters and digits made one ``_``: a name shows whatever separators or escapes
    it was written with (``db-prod``, ``db_prod``, ``DB Prod``, ``db%2Dprod``, ``db&#45;prod``)."""
    variants = {text, unquote_plus(text), html.unescape(text), html.unescape(unquote_plus(text))}
    return " ".join(re.sub(r"[^a-z0-9]+", "_", variant.lower()) for variant in variants)


# A form's CSRF token is 64 random letters and digits: one in about 15,000 holds "acme" in some case.
CSRF_TOKEN = re.compile(r'(name="csrfmiddlewaretoken" value=")[A-Za-z0-9]+')


def _leaks(who: str, response) -> set[str]:
    text = response.content.decode("utf-8", errors="replace") + " ".join(
        f"{k}: {v}" for k, v in response.items()
    )
    text = CSRF_TOKEN.sub(r"\1", text)
    leaked = {canary for canary in CANARIES if canary in text} - ALLOWED[who]
    if who != "owner":
        spelt = _spellings(text)
        leaked |= {fragment for fragment in UNSHARED_FRAGMENTS if fragment in spelt}
    return leaked


def test_the_url_walk_covers_the_read_paths(world):
    names = {name for _, name in _urls(world)}
    for expected in (
        "api:series",
        "api:lanes",
        "api:events",
        "api:incident",
        "api:snapshot",
        "api:audit",
        "api:incident-export",
        "permalink",
        "incident",
        "timeline:page",
        "sharing",
        "api:unshared-descriptions",
        "api:unshared-description",
        "promql:query",
        "promql:query-range",
        "promql:series",
        "promql:label-values",
        "analysis-changes",
        "analysis-onsets",
        "analysis-selection",
        "analysis-lag",
    ):
        assert expected in names


@pytest.mark.parametrize("who", list(ALLOWED))
def test_no_viewer_reads_beyond_its_grant_through_any_url(world, who):
    client = world.clients[who]
    problems = []
    for url, name in _urls(world):
        response = client.get(url, follow=False)
        if response.status_code >= 500 and not url.startswith("/readyz"):  # 503: no worker in this test
            problems.append(f"{url}: {response.status_code}")
        leaked = _leaks(who, response)
        if leaked:
            problems.append(f"{url} ({name}) shows {sorted(leaked)}")
        if response.status_code == 302 and "Location" in response:
            followed = client.get(response["Location"])
            leaked = _leaks(who, followed)
            if leaked:
                problems.append(f"{url} → {response['Location']} shows {sorted(leaked)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("who", ["full", "redacted", "aggregate", "none"])
def test_another_organisations_objects_answer_404_not_403(world, who):
    client = world.clients[who]
    incident = world.owner_objects["incident"]
    for url in (
        f"/api/v1/incidents/{incident.pk}",
        f"/incidents/{incident.pk}/",
        f"/api/v1/incidents/{incident.pk}/export.json",
        f"/api/v1/snapshots/{world.fillers['snapshot_id'][0]}",
        f"/api/v1/batches/{world.fillers['batch_id'][0]}",
    ):
        assert client.get(url).status_code == 404, (who, url)


def test_the_full_grantee_sees_exactly_the_granted_series(world):
    series = world.clients["full"].get("/api/v1/series").json()["series"]
    assert {s["metric"] for s in series} == {"nfs_rpc_slots_in_use"}
    assert len(series) == 6


def test_the_redacted_grantee_sees_pseudonyms_and_no_bodies(world):
    client = world.clients["redacted"]
    series = client.get("/api/v1/series").json()["series"]
    assert {s["metric"] for s in series} == {"nfs_rpc_slots_in_use", SECRET_METRIC}
    events = client.get(f"/api/v1/events?{WINDOW}").json()["events"]
    assert [e["message"] for e in events] == [""]


def test_the_aggregate_grantee_gets_no_single_series(world):
    assert world.clients["aggregate"].get("/api/v1/series").json()["series"] == []


def test_access_requests_are_seen_by_the_two_organisations_only(world):
    request_id = world.owner_objects["access_request"].pk
    assert AccessRequest.objects.filter(pk=request_id).exists()
    for who in ("redacted", "aggregate", "none"):
        body = world.clients[who].get("/api/v1/access-requests").content.decode()
        assert ACCESS_REASON not in body


def _split_lanes(joined: str) -> list[str]:
    """The ``lanes`` parameter of a redirect as the war room reads it (state.js ``splitSpecs``)."""
    specs = []
    for item in re.split(r",(?=[a-z]+:[a-z][a-z0-9-]*/)", joined):
        try:
            specs.append(str(LaneSpec.parse(item)))
        except LaneSpecError:
            continue
    return specs


def _war_room_reads(client, location: str):
    """Yield (what, response) for each read the war room makes to show the view a permalink redirected
    to (timeline.js ``main`` and ``refresh``), and then how many lanes it drew with data."""
    params = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
    window = {"from": params["from"], "to": params["to"]}
    joined = params.get("lanes", "")
    legacy = re.fullmatch(r"[\d,]*", joined) is not None
    query = {**window, **({"series": joined} if legacy and joined else {})}
    catalogue = client.get("/timeline/api/catalogue", query)
    yield f"catalogue {query}", catalogue
    specs = [] if legacy else _split_lanes(joined)
    specs = specs or catalogue.json()["from_series"] or catalogue.json()["defaults"]
    lanes = client.get("/timeline/api/lanes", {**window, "width": "1200", "lane": specs})
    yield f"lanes {specs}", lanes
    events = {key[3:]: value for key, value in params.items() if key.startswith("ev_") and key != "ev_text"}
    if params.get("ev_text"):
        events["q"] = params["ev_text"]
    yield "events", client.get("/timeline/api/events", {**window, "limit": "500", **events})
    if params.get("q"):
        yield "search", client.get("/timeline/api/events", {**window, "limit": "200", "q": params["q"]})
    if params.get("sel"):
        yield "selected event", client.get("/timeline/api/events", {"id": params["sel"]})
    if params.get("incident"):
        yield "annotations", client.get(f"/api/v1/incidents/{params['incident']}/annotations")
    yield "drawn", sum(lane["status"] == "ok" and lane["points"] > 0 for lane in lanes.json()["lanes"])


@pytest.mark.parametrize("who", list(ALLOWED))
def test_no_viewer_reads_beyond_its_grant_through_a_lane_spec_permalink(world, who):
    client = world.clients[who]
    problems = []

    def check(what: str, response) -> None:
        if response.status_code >= 500:
            problems.append(f"{what}: {response.status_code}")
        leaked = _leaks(who, response)
        if leaked:
            problems.append(f"{what} shows {sorted(leaked)}")

    drawn = 0
    for link in world.owner_objects["spec_links"]:
        check(f"/api/v1/permalinks/{link.short_id}", client.get(f"/api/v1/permalinks/{link.short_id}"))
        opened = client.get(f"/i/{link.short_id}")
        check(f"/i/{link.short_id}", opened)
        if not (opened.status_code == 302 and opened["Location"].startswith("/timeline/")):
            pageless = who.startswith("read_token") or who in ("push_token", "anonymous")
            assert pageless, (who, opened.status_code)
            continue
        check(opened["Location"], client.get(opened["Location"]))
        for what, response in _war_room_reads(client, opened["Location"]):
            if what == "drawn":
                drawn += response
                continue
            assert response.status_code == 200, (who, what, response.content[:300])
            check(f"{opened['Location']}: {what}", response)
        made = client.post(f"/api/v1/permalinks/{link.short_id}/snapshots")
        check(f"snapshot of {link.short_id}", made)
        if made.status_code == 201:
            check("the snapshot", client.get(f"/api/v1/snapshots/{made.json()['snapshot']}"))
    # Every viewer with a grant draws some of the lanes, so the reads above returned real data to check.
    assert (drawn > 0) == (who in ("owner", "full", "redacted", "aggregate")), (who, drawn)
    assert not problems, "\n".join(problems)


def _warroom_json(client) -> dict:
    page = client.get("/timeline/").content.decode()
    return json.loads(page.split('id="warroom" type="application/json">')[1].split("</script>")[0])


def _application_placeholder(entries: list[dict]) -> dict:
    (entry,) = [e for e in entries if (e["org"], e["signal"]) == ("storage", "application")]
    return entry


@pytest.mark.parametrize("who", PLACEHOLDER_VIEWERS)
def test_placeholders_still_say_what_exists_and_whom_to_ask(world, who):
    client = world.clients[who]
    ask = "/sharing/?owner=storage&signals=application#request-access"
    for entries in (
        _warroom_json(client)["unshared"],
        client.get("/timeline/api/catalogue", {"from": T0_TEXT, "to": T1_TEXT}).json()["unshared"],
        client.get(f"/api/v1/incidents/{world.owner_objects['joint'].pk}/export.json").json()["not_shared"],
    ):
        entry = _application_placeholder(entries)
        assert entry["count"] == 2 and entry["text"] == "2 series not shared with you", entry
        assert entry["org_name"] == "Storage" and entry["request"] == ask
        (family,) = entry["families"]
        assert (family["name"], family["text"], family["count"]) == (DESCRIPTION_NAME, DESCRIPTION_TEXT, 2)
    report = client.get(f"/api/v1/incidents/{world.owner_objects['joint'].pk}/export.html").content.decode()
    said = f"Storage · application: 2 series not shared with you; {DESCRIPTION_NAME}: {DESCRIPTION_TEXT}"
    assert f"{said} (2 series)" in html.unescape(report)
    sharing = client.get("/sharing/").content.decode()
    assert ask.replace("&", "&amp;") in sharing and DESCRIPTION_NAME in sharing


@pytest.mark.parametrize("who", ["none", "aggregate"])
def test_an_owner_that_hides_counts_still_says_whom_to_ask(world, who):
    disclosure_set(user=world.clients["owner"].user, level="none")
    entry = _application_placeholder(_warroom_json(world.clients[who])["unshared"])
    assert entry["count"] is None and entry["families"] == []
    assert entry["text"] == "data not shared with you"
    assert entry["request"] == "/sharing/?owner=storage&signals=application#request-access"


# Pairs of requests that differ only by a guessed name: one A keeps unshared, one nothing has.
GUESSES = [
    ("/prometheus/api/v1/query", {"query": "{guess}", "time": "1781485200"}),
    ("/prometheus/api/v1/series", {"match[]": "{guess}"}),
    ("/prometheus/api/v1/label/__name__/values", {"match[]": "{guess}"}),
    (
        "/timeline/api/lanes",
        {
            "from": "2026-06-15T00:00:00Z",
            "to": "2026-06-15T01:00:00Z",
            "lane": "line:storage/application/{guess}",
        },
    ),
    (
        "/api/v1/lanes",
        {
            "from": "2026-06-15T00:00:00Z",
            "to": "2026-06-15T01:00:00Z",
            "lane": "line:storage/application/{guess}",
        },
    ),
]


@pytest.mark.parametrize("who", ["none", "read_token_none", "redacted", "aggregate"])
def test_a_guessed_unshared_name_answers_as_a_name_nothing_has(world, who):
    client = world.clients[who]
    for url, params in GUESSES:
        answers = []
        for guess in (UNSHARED_METRIC, "acme_secret_project_gain"):
            response = client.get(url, {k: v.replace("{guess}", guess) for k, v in params.items()})
            body = re.sub(r'"(took|elapsed|server)[a-z_]*": ?[0-9.e-]+', "", response.content.decode())
            answers.append((response.status_code, body.replace(guess, "GUESS")))
        assert answers[0] == answers[1], (who, url, answers)


@pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), reason="already on SQLite"
)
def test_the_leak_test_passes_on_sqlite(tmp_path):
    database = f"sqlite:///{tmp_path / 'leaks.sqlite3'}"
    env = {"JOINTLINE_TEST_DATABASE_URL": database}
    if settings.JOINTLINE_STORE_BACKEND == "clickhouse":  # the engine in-process: one process per folder
        env["JOINTLINE_CLICKHOUSE_URL"] = f"chdb://{tmp_path / 'clickhouse'}"
    pytest_in_subprocess(["tests/test_leaks.py"], env, timeout_s=1500)


def test_a_csrf_token_that_spells_a_fragment_is_not_a_leak_but_the_same_letters_elsewhere_are():
    class Page:
        def __init__(self, body: str) -> None:
            self.content = body.encode()

        def items(self):
            return []

    token = '<input type="hidden" name="csrfmiddlewaretoken" value="x7AcMe0Q">'
    assert _leaks("redacted", Page(token)) == set()
    assert _leaks("redacted", Page(token + "<p>AcMe</p>")) == {"acme"}
