"""Loading the reference scenario into Jointline: straight into the journal (load) or over HTTP (replay).

Both paths go through the same journal and writer as any push, so what the war
room shows of the scenario is exactly what agents pushing it would produce. For an
analysis of one stretch (a benchmark, a test), :func:`store_until` writes a scenario
up to a moment straight into the store.
"""

from __future__ import annotations

import bisect
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import msgspec
from django.conf import settings

from core.records import Batch, EventRecord, SeriesBlock
from ingest.services import batch_accept
from orgs.models import Organization
from store.tasks import refresh_rollups, rollup_refresh_deferred, rollup_refresh_is_deferred

ORGANISATIONS: dict[str, tuple[str, str]] = {
    "cloudops": ("Cloud operator", "#4c78a8"),
    "modeldev": ("Model developer", "#e45756"),
    "infra": ("Scheduler vendor", "#b279a2"),
    "gpuvendor": ("GPU vendor", "#72b7b2"),
    "storage": ("Storage vendor", "#54a24b"),
}


@dataclass(frozen=True)
class DemoGrant:
    owner: str
    grantee: str | None
    name: str
    level: str
    signals: tuple[str, ...] = ()
    name_patterns: tuple[str, ...] = ()
    label_matchers: tuple[str, ...] = ()
    exposed_labels: tuple[str, ...] = ()  # aggregate level: labels a fleet figure may be grouped by


# Who shares what in the reference war room (WALKTHROUGH.md, step 2 and 3).
DEMO_GRANTS: tuple[DemoGrant, ...] = (
    DemoGrant(
        "storage",
        None,
        "array throughput, metadata ops and NFS RPC slots (fleet only)",
        "aggregate",
        ("storage",),
        ("storage_*", "nfs_rpc_*"),
        exposed_labels=("mount",),
    ),
    DemoGrant("storage", "infra", "all storage data, per node", "full", ("storage",)),
    DemoGrant(
        "storage", None, "which nodes depend on the storage service", "full", ("storage",), ("topology",)
    ),
    DemoGrant("modeldev", "infra", "training job logs (no message bodies)", "redacted", ("application",)),
    DemoGrant("modeldev", "storage", "training job logs (no message bodies)", "redacted", ("application",)),
    DemoGrant("gpuvendor", None, "XID error events", "full", ("gpu",), ("xid*", "DCGM_FI_DEV_XID_ERRORS")),
    DemoGrant("infra", None, "scheduler sessions, exclusions and retries", "full", ("scheduler",)),
    DemoGrant("cloudops", None, "node network counters", "full", ("network",), ("node_network_*",)),
    DemoGrant("cloudops", None, "which switch and rack each node is in", "full", ("network",), ("topology",)),
)


def demo_grants_apply() -> int:
    """Create the reference war room's grants that do not exist yet, and push the topology its
    organisations know (:mod:`ingest.scenario.topology`, replaced whole each time); returns how many
    grants were created."""
    from ingest.protocols.topology import parse_topology
    from ingest.scenario.topology import scenario_topologies
    from ingest.topology import topology_replace
    from orgs.models import Grant
    from orgs.services import grant_create

    orgs = {org.slug: org for org in Organization.objects.filter(slug__in=ORGANISATIONS)}
    created = 0
    for demo in DEMO_GRANTS:
        grantee = orgs[demo.grantee] if demo.grantee else None
        if Grant.objects.filter(owner=orgs[demo.owner], grantee=grantee, name=demo.name).exists():
            continue
        grant_create(
            owner=orgs[demo.owner],
            grantee=grantee,
            name=demo.name,
            level=demo.level,
            signals=list(demo.signals),
            name_patterns=list(demo.name_patterns),
            label_matchers=list(demo.label_matchers),
            exposed_labels=list(demo.exposed_labels),
        )
        created += 1
    for slug, document in scenario_topologies():
        topology_replace(org=orgs[slug], document=parse_topology(json.dumps(document).encode()))
    return created


@dataclass
class LoadCounts:
    batches: int = 0
    samples: int = 0
    events: int = 0
    duplicates: int = 0


def load_batches(
    batches: Iterable[tuple[str, Batch]], *, progress: Callable[[int], None] | None = None
) -> LoadCounts:
    """Journal every (org slug, batch); the worker (or eager Celery) applies them. Idempotent.

    Applied here (eager Celery, the embedded default), their rollups are refreshed once at the end,
    as a worker's applies have theirs refreshed by the worker: no beat would do it here, and reads
    of what waits for a refresh go to the raw samples. A caller that loads in several calls inside
    its own :func:`~store.tasks.rollup_refresh_deferred` block refreshes once itself."""
    orgs = {org.slug: org for org in Organization.objects.filter(slug__in=ORGANISATIONS)}
    counts = LoadCounts()
    refresh_here = settings.CELERY_TASK_ALWAYS_EAGER and not rollup_refresh_is_deferred()
    with rollup_refresh_deferred():
        for slug, batch in batches:
            accepted = batch_accept(org=orgs[slug], batch=batch, protocol="scenario")
            counts.batches += 1
            counts.duplicates += int(accepted.duplicate)
            counts.samples += batch.sample_count
            counts.events += batch.event_count
            if progress:
                progress(batch.sample_count + batch.event_count)
    if refresh_here:
        refresh_rollups()
    return counts


def shift_batch(batch: Batch, offset_us: int) -> Batch:
    """The same batch with every timestamp moved by ``offset_us`` (for live replay)."""
    if offset_us == 0:
        return batch
    return Batch(
        source=batch.source,
        series=[
            SeriesBlock(
                signal=b.signal,
                metric=b.metric,
                labels=b.labels,
                kind=b.kind,
                unit=b.unit,
                ts=[t + offset_us for t in b.ts],
                values=b.values,
            )
            for b in batch.series
        ],
        events=[
            EventRecord(
                ts=e.ts + offset_us,
                end_ts=None if e.end_ts is None else e.end_ts + offset_us,
                signal=e.signal,
                kind=e.kind,
                severity=e.severity,
                name=e.name,
                message=e.message,
                resource=e.resource,
                attributes=e.attributes,
            )
            for e in batch.events
        ],
    )


def batch_until(batch: Batch, end_us: int) -> Batch:
    """The part of a batch stamped before ``end_us``. Each block's stamps are in order, as agents
    send them."""
    cut = ((block, bisect.bisect_left(block.ts, end_us)) for block in batch.series)
    series = [msgspec.structs.replace(b, ts=b.ts[:n], values=b.values[:n]) for b, n in cut if n]
    return Batch(source=batch.source, series=series, events=[e for e in batch.events if e.ts < end_us])


def demo_organisations_create() -> dict[str, Organization]:
    """The five organisations of the reference war room and its grants (what exists is kept)."""
    from orgs.services import organization_create

    orgs = {
        slug: organization_create(slug=slug, name=name, colour=colour)[0]
        for slug, (name, colour) in ORGANISATIONS.items()
    }
    demo_grants_apply()
    return orgs


def store_until(batches: Iterable[tuple[str, Batch]], end_us: int) -> int:
    """Write every (org slug, batch), cut at ``end_us``, straight into the store in one transaction
    (not through the journal): a scenario up to a moment, for an analysis of what happened before
    it. Returns how many batches were written."""
    from django.db import transaction

    from store import get_store

    orgs = {org.slug: org for org in Organization.objects.filter(slug__in=ORGANISATIONS)}
    store, written = get_store(), 0
    with transaction.atomic():
        for slug, batch in batches:
            part = batch_until(batch, end_us)
            if part.series or part.events:
                store.write_batch(org_id=orgs[slug].pk, batch=part)
                written += 1
    return written


def split_batch(batch: Batch, max_points: int) -> Iterator[Batch]:
    """Cut a batch into pushes of at most ``max_points`` samples (events go with the first)."""
    current: list[SeriesBlock] = []
    size = 0
    events = batch.events
    for block in batch.series:
        if current and size + len(block.ts) > max_points:
            yield Batch(source=batch.source, series=current, events=events)
            current, size, events = [], 0, []
        current.append(block)
        size += len(block.ts)
    if current or events:
        yield Batch(source=batch.source, series=current, events=events)


class PushError(RuntimeError):
    pass


def push_native(url: str, token: str, body: bytes, *, retries: int = 8) -> dict:
    """POST one native batch; retries 429 (after Retry-After) and 5xx with backoff, like a real agent."""
    if not url.startswith(("http://", "https://")):
        raise PushError(f"--url must be http:// or https://, not {url!r}")
    request = urllib.request.Request(  # noqa: S310 (scheme checked above)
        url.rstrip("/") + "/api/v1/push",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    delay = 0.5
    for _attempt in range(retries):
        try:
            with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 429:
                time.sleep(float(exc.headers.get("Retry-After", "1")))
                continue
            if exc.code >= 500:
                time.sleep(delay)
                delay = min(delay * 2, 10)
                continue
            raise PushError(
                f"push refused with {exc.code}: {exc.read()[:500].decode(errors='replace')}"
            ) from exc
        except urllib.error.URLError:
            time.sleep(delay)
            delay = min(delay * 2, 10)
    raise PushError(f"push to {url} failed after {retries} attempts")


DEMO_INCIDENT_TITLE = "Training initialisation takes hours on 60 nodes"


def demo_incident_create(manifest: dict) -> bool:
    """The reference incident as the war room recorded it: five organisations, annotations from
    four of them. Idempotent by title; returns whether it was created."""
    from django.contrib.auth import get_user_model

    from incidents.services import (
        annotation_create,
        incident_create,
        incident_participants_add_without_consent,
        incident_update,
    )
    from timeline.models import Incident

    if "cause" in manifest:
        cause = manifest["cause"]["name"]
        raise ValueError(f"the demo incident tells the reference cause; this manifest's cause is {cause}")
    if Incident.objects.filter(title=DEMO_INCIDENT_TITLE).exists():
        return False
    episodes = {episode["kind"]: episode for episode in manifest["episodes"]}
    slowdown, fix = episodes["init_slowdown"], episodes.get("fix_reinit")
    users = {user.username: user for user in get_user_model().objects.filter(username__endswith="-admin")}
    owner = users["modeldev-admin"]
    incident = incident_create(
        user=owner,
        title=DEMO_INCIDENT_TITLE,
        window_start=slowdown["start_us"] - 3_600_000_000,
        window_end=(fix or slowdown)["end_us"] + 1_800_000_000,
        severity="sev1",
    )
    # The loader records a war room that already took place: the four others took part in it, so they
    # join without the invitation a person's would need answered.
    incident_participants_add_without_consent(
        incident=incident, organisations=["cloudops", "infra", "gpuvendor", "storage"]
    )
    start = slowdown["start_us"]
    notes = [
        ("modeldev-admin", start + 60_000_000, "init started, 60 nodes"),
        ("infra-admin", start, "session start on node-01..node-60"),
        ("modeldev-admin", start + 15 * 60_000_000, "metadata ops at ceiling"),
        ("storage-admin", start + 20 * 60_000_000, "small random reads, 4 KiB, from all clients"),
    ]
    if fix is not None:
        notes.append(
            ("modeldev-admin", fix["start_us"], "fix deployed: rank-sharded Arrow files, async deletes")
        )
    for username, ts, text in notes:
        annotation_create(incident=incident, user=users[username], ts=ts, text=text)
    incident_update(
        incident=incident,
        user=owner,
        status="identified",
        summary="60 nodes' fragmented small random reads saturated the storage metadata service.",
    )
    return True
