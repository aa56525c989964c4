"""The time-aligned store: series and their samples, events, sources.

Timestamps in ``Sample`` and ``Event`` are integer microseconds since the Unix
epoch, UTC (see docs/decisions/0002-timestamps-as-epoch-microseconds.md). The
``Sample`` and ``Event`` tables are created by the store backend for the engine
(``store/``): range-partitioned by day on PostgreSQL, plain tables on
SQLite; Django does not manage them.

The default managers of ``Series`` and ``Event`` refuse to read: a read goes
through ``Model.objects.scoped(scope)`` with a scope from ``orgs.access``;
writers and system jobs use the ``unscoped`` manager.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import models

from core.records import EVENT_KINDS, SERIES_KINDS, SEVERITIES, SIGNALS
from orgs.access import NoScope, Scope, require_scope
from orgs.models import Organization

SIGNAL_CHOICES = [(s, s) for s in SIGNALS]


def ts_to_datetime(ts_us: int) -> datetime:
    return datetime.fromtimestamp(ts_us / 1_000_000, tz=UTC)


class ScopedQuerySet(models.QuerySet):
    scope_filter_name = "series_filter"

    def scoped(self, scope: Scope) -> ScopedQuerySet:
        scope = require_scope(scope)
        return self.filter(getattr(scope, self.scope_filter_name)())


class FailClosedManager(models.Manager):
    """Default manager that refuses unscoped reads."""

    def get_queryset(self):
        raise NoScope(f"{self.model.__name__} is read through .scoped(scope) or the unscoped manager")

    def scoped(self, scope: Scope):
        return super().get_queryset().scoped(scope)


class Source(models.Model):
    """An agent of one organisation that pushes data; carries its clock offset."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="sources")
    name = models.CharField(max_length=200)
    clock_offset_us = models.BigIntegerField(
        default=0, help_text="Added to this source's timestamps at query time."
    )
    timezone = models.CharField(max_length=64, default="UTC")
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="source_unique_per_org")]

    def __str__(self) -> str:
        return f"{self.org_id}/{self.name}"


class Series(models.Model):
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="series")
    source = models.ForeignKey(
        Source, on_delete=models.SET_NULL, null=True, blank=True, related_name="series"
    )
    signal = models.CharField(max_length=16, choices=SIGNAL_CHOICES)
    metric = models.CharField(max_length=200)
    labels = models.JSONField(default=dict)
    labels_key = models.TextField(help_text="Canonical form of labels: sorted name=value pairs.")
    kind = models.CharField(max_length=8, choices=[(k, k) for k in SERIES_KINDS], default="gauge")
    unit = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = FailClosedManager.from_queryset(ScopedQuerySet)()
    unscoped = models.Manager.from_queryset(ScopedQuerySet)()

    class Meta:
        base_manager_name = "unscoped"
        verbose_name_plural = "series"
        constraints = [
            models.UniqueConstraint(fields=["org", "metric", "labels_key"], name="series_identity"),
        ]
        indexes = [models.Index(fields=["org", "signal", "metric"])]

    def __str__(self) -> str:
        return f"{self.metric}{{{self.labels_key}}}"


class Sample(models.Model):
    """One point. Read through the store backend, never through this model's manager."""

    pk = models.CompositePrimaryKey("series_id", "ts")
    series = models.ForeignKey(Series, on_delete=models.DO_NOTHING, db_constraint=False)
    ts = models.BigIntegerField()
    value = models.FloatField()

    class Meta:
        managed = False
        db_table = "timeline_sample"

    def __str__(self) -> str:
        return f"{self.series_id}@{self.ts}={self.value}"


class EventQuerySet(ScopedQuerySet):
    scope_filter_name = "event_filter"


class Event(models.Model):
    id = models.BigAutoField(primary_key=True)
    org = models.ForeignKey(Organization, on_delete=models.DO_NOTHING, db_constraint=False)
    source = models.ForeignKey(Source, on_delete=models.DO_NOTHING, db_constraint=False, null=True)
    signal = models.CharField(max_length=16, choices=SIGNAL_CHOICES)
    ts = models.BigIntegerField()
    end_ts = models.BigIntegerField(null=True)
    kind = models.CharField(max_length=8, choices=[(k, k) for k in EVENT_KINDS])
    severity = models.CharField(max_length=10, choices=[(s, s) for s in SEVERITIES])
    name = models.CharField(max_length=200)
    message = models.TextField(blank=True, default="")
    resource = models.JSONField(default=dict)
    attributes = models.JSONField(default=dict)
    fingerprint = models.BigIntegerField()

    objects = FailClosedManager.from_queryset(EventQuerySet)()
    unscoped = models.Manager.from_queryset(EventQuerySet)()

    class Meta:
        managed = False
        db_table = "timeline_event"
        base_manager_name = "unscoped"

    def __str__(self) -> str:
        return f"{self.name} @ {self.ts}"

    @property
    def time(self) -> datetime:
        return ts_to_datetime(self.ts)


class IncidentStatus(models.TextChoices):
    INVESTIGATING = "investigating"
    IDENTIFIED = "identified"
    MONITORING = "monitoring"
    RESOLVED = "resolved"


class IncidentSeverity(models.TextChoices):
    SEV1 = "sev1", "SEV1 (critical)"
    SEV2 = "sev2", "SEV2 (major)"
    SEV3 = "sev3", "SEV3 (minor)"
    SEV4 = "sev4", "SEV4 (low)"


class Incident(models.Model):
    """A shared war-room record: owner and participant organisations see it; others get 404."""

    title = models.CharField(max_length=200)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="incidents_owned")
    participants = models.ManyToManyField(Organization, related_name="incidents", blank=True)
    status = models.CharField(
        max_length=14, choices=IncidentStatus.choices, default=IncidentStatus.INVESTIGATING
    )
    severity = models.CharField(max_length=4, choices=IncidentSeverity.choices, default=IncidentSeverity.SEV2)
    window_start = models.BigIntegerField(help_text="µs since epoch, UTC")
    window_end = models.BigIntegerField(null=True, blank=True, help_text="µs since epoch, UTC; empty: open")
    lanes = models.JSONField(default=list, blank=True, help_text="Lane specs of the war-room view.")
    summary = models.TextField(blank=True, default="")
    root_cause = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="incidents_created"
    )
    updated_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.title


class Annotation(models.Model):
    """A point (``end_ts`` empty) or range note on the timeline, in its author's organisation's colour."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="annotations")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="annotations")
    author = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="annotations")
    ts = models.BigIntegerField()
    end_ts = models.BigIntegerField(null=True, blank=True)
    text = models.TextField()
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["ts", "pk"]

    def __str__(self) -> str:
        return self.text[:60]


class IncidentNote(models.Model):
    """The incident's chronological log: people's notes and system entries (status changed, …)."""

    class Kind(models.TextChoices):
        NOTE = "note"
        SYSTEM = "system"

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="notes")
    at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.NOTE)
    org = models.ForeignKey(Organization, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    author = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    text = models.TextField()

    class Meta:
        ordering = ["at", "pk"]

    def __str__(self) -> str:
        return self.text[:60]


class Permalink(models.Model):
    """A short URL that reopens one exact view; each visitor sees it through their own scope."""

    short_id = models.CharField(max_length=16, unique=True)
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="permalinks")
    created_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="+")
    incident = models.ForeignKey(
        Incident, on_delete=models.CASCADE, null=True, blank=True, related_name="permalinks"
    )
    state = models.JSONField(help_text="Absolute window, lanes in order with their kinds, zoom, selection.")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.short_id


class Snapshot(models.Model):
    """Frozen evidence of a permalink: per participant organisation, the data it was allowed to see."""

    permalink = models.ForeignKey(Permalink, on_delete=models.CASCADE, related_name="snapshots")
    created_by = models.ForeignKey("auth.User", on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.permalink_id}"


class SnapshotPart(models.Model):
    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="parts")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    content = models.BinaryField(help_text="Canonical JSON of what this organisation could see.")
    sha256 = models.CharField(max_length=64)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["snapshot", "org"], name="snapshot_part_per_org")]

    def __str__(self) -> str:
        return f"{self.snapshot_id}/{self.org_id}"


class ClockOrigin(models.TextChoices):
    DECLARED = "declared"
    ESTIMATED = "estimated"


class ClockCorrection(models.Model):
    """A correction of one agent's clock, applied to its timestamps at query time, never to stored ones.

    It adds ``offset_us + drift_us_per_hour * (ts - reference_ts) / 1 h`` to the stored timestamps of
    the organisation's data from ``source`` (every source when empty) whose labels (series) or resource
    (events) match ``label_matcher`` (e.g. ``node="node-17"``; empty: all), for stored ``ts`` in
    ``[valid_from, valid_to)``. Several active corrections that match add up (a node's clock on top of
    its agent's). Rows are never deleted by the app: switching one off keeps the record (auditable)."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="clock_corrections")
    source = models.ForeignKey(
        Source, on_delete=models.CASCADE, null=True, blank=True, related_name="clock_corrections"
    )
    label_matcher = models.CharField(max_length=300, blank=True, default="")
    offset_us = models.BigIntegerField(
        help_text="Added to stored timestamps (µs); negative for a fast clock."
    )
    drift_us_per_hour = models.BigIntegerField(default=0, help_text="Added per hour after reference_ts (µs).")
    reference_ts = models.BigIntegerField(null=True, blank=True, help_text="µs since epoch; where drift is 0")
    valid_from = models.BigIntegerField(null=True, blank=True, help_text="stored µs; empty: always")
    valid_to = models.BigIntegerField(null=True, blank=True, help_text="stored µs, exclusive; empty: open")
    origin = models.CharField(max_length=10, choices=ClockOrigin.choices, default=ClockOrigin.DECLARED)
    uncertainty_us = models.BigIntegerField(default=0)
    method = models.CharField(max_length=100, blank=True, default="")
    note = models.TextField(blank=True, default="")
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    changed_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["org_id", "pk"]
        indexes = [models.Index(fields=["org", "active"])]

    def __str__(self) -> str:
        where = f"{self.source.name if self.source_id else '*'}{{{self.label_matcher}}}"
        return f"{self.org_id}/{where} {self.offset_us:+d} µs"


class TopologyEdge(models.Model):
    """One dependency an organisation pushed (``POST /api/v1/topology``): ``dependent`` depends on
    ``dependency`` (a node on the filesystem it mounts, a service on one it calls). Read through the
    gate like an event of the organisation's ``signal`` named ``topology``
    (:meth:`orgs.access.Scope.topology_readable`); a push replaces what its ``source`` said before."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=200)
    signal = models.CharField(max_length=16, choices=SIGNAL_CHOICES, default="other")
    dependent_kind = models.CharField(max_length=64)
    dependent = models.CharField(max_length=200)
    dependency_kind = models.CharField(max_length=64)
    dependency = models.CharField(max_length=200)
    pushed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "source", "dependent_kind", "dependent", "dependency_kind", "dependency"],
                name="topology_edge_identity",
            )
        ]
        indexes = [models.Index(fields=["org", "signal"])]

    def __str__(self) -> str:
        return f"{self.dependent_kind}/{self.dependent} -> {self.dependency_kind}/{self.dependency}"


class TopologyEntity(models.Model):
    """An entity of a pushed topology with the metric-name globs of the organisation's own series that
    describe it (a storage array's totals describe its service, not any one node)."""

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    source = models.CharField(max_length=200)
    signal = models.CharField(max_length=16, choices=SIGNAL_CHOICES, default="other")
    kind = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    series_patterns = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "source", "kind", "name"], name="topology_entity_identity")
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


class InvitationStatus(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"


class IncidentInvitation(models.Model):
    """An organisation asked to take part in an incident. It becomes a participant (``Incident.participants``)
    only when one of its own analysts or admins accepts: until then it cannot open the incident, add to
    it or receive a part of its snapshots, and the incident does not list it. One row per incident and
    organisation; inviting again after a decline asks again."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="invitations")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="incident_invitations")
    status = models.CharField(
        max_length=8, choices=InvitationStatus.choices, default=InvitationStatus.PENDING
    )
    invited_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    invited_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-invited_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["incident", "org"], name="incident_invitation_per_org")
        ]
        indexes = [models.Index(fields=["org", "status"])]

    def __str__(self) -> str:
        return f"{self.org_id} to incident {self.incident_id}: {self.status}"


class Investigation(models.Model):
    """What the analyses found in an incident's window as one organisation may read it: the findings
    (``analysis.investigation``), the baseline the ranking compared with, and when. One row per
    incident and viewer organisation, so no organisation's findings are ever shown to another."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="investigations")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="investigations")
    window_start = models.BigIntegerField(help_text="µs since epoch, UTC: the window investigated")
    window_end = models.BigIntegerField(help_text="µs since epoch, UTC")
    findings = models.JSONField(default=list, blank=True)
    baseline = models.JSONField(default=dict, blank=True, help_text="the baseline used, and why")
    computed_at = models.DateTimeField()
    compute_ms = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["incident", "org"], name="investigation_per_incident_org")
        ]

    def __str__(self) -> str:
        return f"investigation of incident {self.incident_id} for {self.org_id}"
