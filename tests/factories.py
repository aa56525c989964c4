"""Builders for what tests set up again and again: organisations, members with a signed-in client,
gauge blocks, log lines and spans, and writes of them to the store.

Times are µs since the epoch, as the store keeps them; ``T0`` is the start of the reference day.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.test import APIClient

from core.records import Batch, EventRecord, SeriesBlock
from incidents import services as timeline_services
from orgs.access import Scope
from orgs.models import Organization, Role
from orgs.services import user_create
from store import StoreBackend, WriteResult, get_store
from timeline.lanes import SeriesGroup
from timeline.models import Incident, Permalink, Series, Snapshot

T0 = 1_781_481_600_000_000  # 2026-06-15T00:00:00Z
S = 1_000_000
MINUTE = 60 * S
HOUR = 3600 * S
DAY = 24 * HOUR
PASSWORD = "correct-horse-battery"
FIRST_SIX_HOURS = {"from": "2026-06-15T00:00:00Z", "to": "2026-06-15T06:00:00Z"}


def organizations(*slugs: str) -> dict[str, Organization]:
    """One organisation per slug, named after it, keyed by it."""
    return {slug: Organization.objects.create(slug=slug, name=slug.title()) for slug in slugs}


def own_scope(org: Organization) -> Scope:
    """What ``org`` itself reads: its own series and events, nothing granted."""
    return Scope(viewer_org_id=org.pk, viewer="test", own_org_ids=frozenset({org.pk}))


def signed_in(user: User) -> APIClient:
    """An API client with ``user``'s session; the user is ``client.user``."""
    client = APIClient()
    client.force_login(user)
    client.user = user
    return client


def member(org: Organization, username: str, role: str = Role.ADMIN) -> User:
    """A new member of ``org`` with ``role``, whose password is ``PASSWORD``."""
    return user_create(org=org, username=username, role=role, password=PASSWORD)[0]


def member_client(org: Organization, username: str, role: str = Role.ADMIN) -> APIClient:
    """A signed-in API client of a new member of ``org`` (``client.user``) with ``role``."""
    return signed_in(member(org, username, role))


def gauge(
    metric: str,
    labels: dict[str, str],
    values: Iterable[float],
    *,
    step_s: int = 15,
    start: int = T0,
    signal: str = "storage",
    kind: str = "gauge",
    unit: str = "",
    ts: Iterable[int] | None = None,
) -> SeriesBlock:
    """A series block (a gauge unless ``kind`` says otherwise) of ``values``, at the times ``ts`` or else
    one every ``step_s`` seconds from ``start``."""
    values = [float(value) for value in values]
    return SeriesBlock(
        signal=signal,
        metric=metric,
        labels=labels,
        kind=kind,
        unit=unit,
        ts=[start + i * step_s * S for i in range(len(values))] if ts is None else list(ts),
        values=values,
    )


def node_gauge(
    values: Iterable[float], *, node: str = "node-01", metric: str = "nfs_rpc_slots_in_use", **fields
) -> SeriesBlock:
    """``metric`` of one ``node`` (its only label), as :func:`gauge` builds it from ``fields``."""
    return gauge(metric, {"node": node}, values, **fields)


def log_line(
    ts: int,
    message: str,
    *,
    node: str | None = None,
    signal: str = "application",
    name: str = "shard_load",
    severity: str = "info",
    attributes: dict | None = None,
    end_ts: int | None = None,
    resource: dict | None = None,
) -> EventRecord:
    """A log line with ``resource`` labels, or else of ``node`` if given (its only resource label);
    with ``end_ts`` a span."""
    if resource is None:
        resource = {} if node is None else {"node": node}
    return EventRecord(
        ts=ts,
        end_ts=end_ts,
        signal=signal,
        kind="log" if end_ts is None else "span",
        severity=severity,
        name=name,
        message=message,
        resource=resource,
        attributes=attributes or {},
    )


# One attribute of each JSON type, as events carry them.
TYPED_ATTRIBUTES = {"attempt": 2, "ok": False, "ratio": 0.5, "none": None}


def typed_span(message: str, **attributes) -> EventRecord:
    """A warning span of ``node-17`` from 5 µs to 10 s after ``T0`` saying ``message``, whose attributes
    are :data:`TYPED_ATTRIBUTES` and ``attributes``."""
    return log_line(
        T0 + 5,
        message,
        node="node-17",
        signal="scheduler",
        name="session",
        severity="warning",
        attributes={**TYPED_ATTRIBUTES, **attributes},
        end_ts=T0 + 10 * S,
    )


def span(
    ts: int, end_ts: int, *, node: str, message: str = "", signal: str = "scheduler", name: str = "session"
) -> EventRecord:
    """A scheduler session of ``node`` from ``ts`` to ``end_ts``."""
    return log_line(ts, message, node=node, signal=signal, name=name, end_ts=end_ts)


def nodes(count: int) -> dict[str, set[str]]:
    """The ``node`` label values ``node-0`` .. of ``count`` series, as a catalogue group lists them."""
    return {"node": {f"node-{i}" for i in range(count)}}


def series_group(
    path: str, *, kind: str = "gauge", count: int = 1, labels: dict | None = None
) -> SeriesGroup:
    """The catalogue's group of ``count`` series at ``path`` (``org/signal/metric``, as a lane spec names
    them; the organisation's name is its slug), each readable alone, with ``labels``' values."""
    org, signal, metric = path.split("/", 2)
    group = SeriesGroup(
        org=org,
        org_name=org,
        colour="#000000",
        signal=signal,
        metric=metric,
        kind=kind,
        unit="",
        count=count,
        per_series=count,
    )
    for name, values in (labels or {}).items():
        group.labels[name] = set(values)
    return group


def write(
    org: Organization,
    *,
    series: Sequence[SeriesBlock] = (),
    events: Sequence[EventRecord] = (),
    source: str = "test",
    store: StoreBackend | None = None,
) -> WriteResult:
    """Store ``series`` and ``events`` as ``org``'s, from ``source``, in one transaction, in ``store``
    (the configured one unless given)."""
    with transaction.atomic():
        return (store or get_store()).write_batch(
            org_id=org.pk, batch=Batch(source=source, series=list(series), events=list(events))
        )


def snapshotted_link(user: User, incident: Incident) -> tuple[Permalink, Snapshot]:
    """A permalink of ``incident`` to every series of ``user``'s organisation over the first six hours
    of the reference day, and a snapshot of it made by ``user``."""
    series_ids = list(Series.unscoped.filter(org=user.membership.org).values_list("pk", flat=True))
    permalink = timeline_services.permalink_create(
        user=user, state={**FIRST_SIX_HOURS, "lanes": series_ids}, incident=incident
    )
    return permalink, timeline_services.snapshot_create(permalink=permalink, user=user)
