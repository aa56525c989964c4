"""Which series a lane reads, through the viewer's scope, and what a lane may say about them.

Invariants:

* every series reaches the browser through ``present_series``: a member readable alone carries its
  presented JSON, an aggregate-only member carries none and is never drawn or described on its own;
* per-series drawings (line, rate, heatmap rows, band's per-node lines) need a series the scope may
  read alone (``full``, ``redacted``, or a fleet-level series under an ``aggregate`` grant); fleet
  aggregates (band, sum) may include per-node series at ``aggregate`` level, but only in groups of at
  least ``MIN_AGGREGATE_GROUP`` series (one constant, in ``orgs.access``), and never show their labels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db.models import BooleanField, ExpressionWrapper, Q

from core.labels import label_matches
from orgs.access import NoScope, Scope, fleet_group_allowed, require_scope
from orgs.read_context import note_read
from store import get_store
from timeline.lanes.spec import FLEET_KINDS, LaneSpec
from timeline.models import Series
from timeline.presenters import present_series

_NATURAL = re.compile(r"(\d+)")


@dataclass
class Member:
    """One series of a lane, with the viewer's level. ``presented`` is its JSON for the viewer, or None
    when the series may only be read inside a fleet aggregate (an ``aggregate`` grant on per-node data):
    such a member contributes to bands and sums and is never drawn or described on its own."""

    series: Series
    level: str
    presented: dict | None

    @property
    def alone(self) -> bool:
        return self.presented is not None


def natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in _NATURAL.split(text)]


def readable_series(scope: Scope, *, include_aggregate: bool):
    """Series the scope may read: one by one, or with ``include_aggregate`` also those it may only
    aggregate. The scope's own filter is the only WHERE clause (``Series.objects.scoped`` has no way
    to ask for the aggregate-only rows, hence the unscoped manager filtered by the scope here)."""
    scope = require_scope(scope)
    if include_aggregate:
        return Series.unscoped.filter(scope.series_filter(include_aggregate=True)).select_related("org")
    return Series.objects.scoped(scope).select_related("org")


def readable_members(scope: Scope, series) -> list[Member]:
    """The series a scope may read at some level; those readable alone are presented for the viewer."""
    members = []
    for s in series:
        level = scope.series_level(s)
        if level is None:
            continue
        presented = None
        if scope.readable_alone(s):
            try:
                presented = present_series(scope, s)
            except NoScope:
                continue
        members.append(Member(series=s, level=level, presented=presented))
    return members


def select_members(scope: Scope, spec: LaneSpec, *, metric: str | None = None) -> list[Member]:
    """Series of a spec, matched on the labels the viewer sees (a masked label matches nothing, and a
    spec with labels matches no aggregate-only series). Fleet kinds include aggregate-only series.
    ``metric``: the same organisation's series of that name instead, of any signal (a capacity)."""
    return LaneSeries(scope, [(spec, metric)]).members(spec, metric=metric)


class LaneSeries:
    """The series of many lane specs (and their capacities, ``(spec, metric)``) read in one statement
    through the scope; :meth:`members` gives each spec what :func:`select_members` would. The rows of
    a spec drawn alone are those of the scope's per-series filter, told apart in the same statement
    when fleet specs (which include aggregate-only series) are read with them. Members are presented
    (and their reads noted) only when asked for, once per call, as one statement per spec would."""

    def __init__(self, scope: Scope, wanted: list[tuple[LaneSpec, str | None]]):
        self.scope = require_scope(scope)
        fleet = {spec.kind in FLEET_KINDS for spec, _ in wanted}
        self._mixed = len(fleet) == 2
        self.rows: list[Series] = []
        if not wanted:
            return
        match = Q(pk__in=[])
        for spec, metric in wanted:
            match |= _spec_q(spec, metric)
        rows = readable_series(self.scope, include_aggregate=True in fleet).filter(match)
        if self._mixed:
            alone = self.scope.series_filter(include_aggregate=False)
            rows = rows.annotate(alone_row=ExpressionWrapper(alone, output_field=BooleanField()))
        self.rows = list(rows.order_by("labels_key", "pk"))

    def members(self, spec: LaneSpec, *, metric: str | None = None) -> list[Member]:
        """:func:`select_members` of ``spec`` (given to the constructor with the same ``metric``)."""
        alone_only = self._mixed and spec.kind not in FLEET_KINDS
        series = [s for s in self.rows if _spec_matches(spec, metric, s) and (not alone_only or s.alone_row)]
        return _labelled_in_order(spec, readable_members(self.scope, series))


def _spec_q(spec: LaneSpec, metric: str | None) -> Q:
    """The rows of one spec (:func:`_spec_matches` says the same of a row read)."""
    q = Q(org__slug=spec.org, metric=metric or spec.what)
    if metric is None:
        q &= Q(signal=spec.signal)
        if spec.series:
            q &= Q(pk__in=spec.series)
    return q


def _spec_matches(spec: LaneSpec, metric: str | None, series: Series) -> bool:
    if series.org.slug != spec.org or series.metric != (metric or spec.what):
        return False
    return metric is not None or (
        series.signal == spec.signal and (not spec.series or series.pk in spec.series)
    )


def members_of(spec: LaneSpec, by_id: dict[int, Member]) -> list[Member]:
    """:func:`select_members` of a spec limited to series ids (``spec.series``), from members already
    read for many such specs at once (:func:`members_by_id`)."""
    members = [
        by_id[pk]
        for pk in dict.fromkeys(spec.series)
        if pk in by_id
        and by_id[pk].series.org.slug == spec.org
        and by_id[pk].series.signal == spec.signal
        and by_id[pk].series.metric == spec.what
    ]
    return _labelled_in_order(spec, members)


def _labelled_in_order(spec: LaneSpec, members: list[Member]) -> list[Member]:
    """``members`` that carry every label of ``spec.labels`` (only series shown alone carry labels), in
    the natural order of their row labels."""
    if spec.labels:
        # core.labels' matcher, as grants and PromQL: a missing label is the empty string
        members = [
            m
            for m in members
            if m.alone and all(label_matches(m.presented["labels"], k, "=", v) for k, v in spec.labels)
        ]
    return sorted(members, key=lambda m: natural_key(row_label(m)))


def members_by_id(scope: Scope, series_ids: list[int]) -> dict[int, Member]:
    """The series of ``series_ids`` the scope may read alone, as members by id: one query for every
    lane of a request named by series id, which the store's read of their buckets finds done
    (:meth:`store.series_reads.SeriesReads.readable_series`, once per read context)."""
    series = get_store().readable_series(scope, series_ids).values()
    return {m.series.pk: m for m in readable_members(scope, series)}


def row_label(member: Member) -> str:
    if not member.alone:
        return ""
    labels = member.presented.get("labels") or {}
    if "node" in labels:
        return str(labels["node"])
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or member.presented["metric"]


def aggregate_allowed(members: list[Member]) -> bool:
    """A fleet aggregate over these members gives away no per-series value the viewer may not see: the
    gate's rule (:func:`orgs.access.fleet_group_allowed`) over the members and those readable alone."""
    return bool(fleet_group_allowed(len(members), sum(1 for m in members if m.alone)))


def group_presented(scope: Scope, members: list[Member]) -> dict:
    """What a lane says about its series as a group: the fields they share, never per-series labels.
    Aggregate-only members are noted for the owner's audit here, as presenting them would."""
    first = next((m.presented for m in members if m.alone), None)
    series = members[0].series
    for member in members:
        if not member.alone:
            note_read(scope, member.series.org_id, f"aggregate {member.series.metric}", member.level)
    return {
        "org": series.org.slug,
        "org_name": series.org.name,
        "colour": series.org.colour,
        "signal": series.signal,
        "metric": first["metric"] if first else series.metric,
        "kind": series.kind,
        "unit": series.unit,
        "count": len(members),
        "levels": sorted({m.level for m in members}),
    }
