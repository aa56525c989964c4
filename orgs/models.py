"""Organisations, their people, and the tokens their agents push with."""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

SLUG_VALIDATOR = RegexValidator(r"^[a-z][a-z0-9-]{1,39}$", "lowercase letters, digits and dashes, 2-40 chars")
COLOUR_VALIDATOR = RegexValidator(r"^#[0-9a-fA-F]{6}$", "a colour like #1f77b4")


class UnsharedDisclosure(models.TextChoices):
    """What ``Organization.unshared_disclosure`` lets a placeholder say (``announce_unshared`` off: no
    placeholder at all)."""

    NONE = "none", "that data exists, per signal"
    COUNTS = "counts", "how many series exist, per signal"
    DESCRIBED = "described", "the counts and the published descriptions"


class Organization(models.Model):
    slug = models.CharField(max_length=40, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    colour = models.CharField(max_length=7, default="#4c78a8", validators=[COLOUR_VALIDATOR])
    push_requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Overrides JOINTLINE_PUSH_REQUESTS_PER_MINUTE for this organisation."
    )
    announce_unshared = models.BooleanField(
        default=True,
        help_text="Show others placeholders (signal family and count) for data not shared with them.",
    )
    push_samples_per_minute = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Overrides JOINTLINE_PUSH_SAMPLES_PER_MINUTE for this organisation."
    )
    unshared_disclosure = models.CharField(
        max_length=10,
        choices=UnsharedDisclosure.choices,
        default=UnsharedDisclosure.COUNTS,
        help_text=(
            "What a placeholder says of data not shared with another organisation (when "
            "announced): none (that some exists, per signal), counts (how many series), described "
            "(the counts and the published descriptions). Never metric names or labels."
        ),
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def request_limit_per_minute(self) -> int:
        return self.push_requests_per_minute or settings.JOINTLINE_PUSH_REQUESTS_PER_MINUTE

    @property
    def sample_limit_per_minute(self) -> int:
        return self.push_samples_per_minute or settings.JOINTLINE_PUSH_SAMPLES_PER_MINUTE


class Role(models.TextChoices):
    VIEWER = "viewer"
    ANALYST = "analyst"
    ADMIN = "admin"


class Membership(models.Model):
    """A person belongs to exactly one organisation."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)

    def __str__(self) -> str:
        return f"{self.user} @ {self.org} ({self.role})"

    @property
    def can_annotate(self) -> bool:
        return self.role in (Role.ANALYST, Role.ADMIN)

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN


class TokenPurpose(models.TextChoices):
    PUSH = "push", "push (write-only)"
    READ = "read", "read"


TOKEN_PREFIX = "jl"  # noqa: S105 (a public prefix, not a secret)  # noqa: S105 (a public prefix, not a secret)


class Revocable:
    """A token or grant: it applies until revoked, and until it expires when it has an expiry."""

    revoked_at: datetime | None
    expires_at: datetime | None

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()


class IngestToken(Revocable, models.Model):
    """A bearer token of one organisation. Only its SHA-256 is stored.

    The token reads ``jl_<prefix>_<secret>``; the prefix is unique and shown in
    lists so a person can tell tokens apart, the secret is shown once.
    A push token can write but read nothing.
    """

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    purpose = models.CharField(max_length=8, choices=TokenPurpose.choices, default=TokenPurpose.PUSH)
    prefix = models.CharField(max_length=12, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="token_name_unique_per_org")]

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.name} ({TOKEN_PREFIX}_{self.prefix}_…)"

    @staticmethod
    def hash_secret(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token_hash, self.hash_secret(token))


class Level(models.TextChoices):
    FULL = "full", "full"
    REDACTED = "redacted", "redacted (labels pseudonymised, log bodies hidden)"
    AGGREGATE = "aggregate", "aggregate (fleet aggregates only)"


LEVEL_RANK = {Level.AGGREGATE: 1, Level.REDACTED: 2, Level.FULL: 3}


class Grant(Revocable, models.Model):
    """The owner lets a grantee organisation (or every organisation) read part of its data.

    The selector is data: signals, glob patterns on metric or event names, and
    Prometheus-style label matchers (``node=~"node-0[1-9]"``). Limits: a window
    of the data's time, an expiry, revocation. ``orgs/access.py`` turns active
    grants into WHERE clauses and redaction.
    """

    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="grants_given")
    grantee = models.ForeignKey(
        Organization,
        on_delete=models.CASCADE,
        related_name="grants_received",
        null=True,
        blank=True,
        help_text="Empty: every other organisation.",
    )
    name = models.CharField(max_length=200, help_text="What is shared, in words (shown to the grantee).")
    signals = models.JSONField(default=list, blank=True, help_text="Signal families; empty: all.")
    name_patterns = models.JSONField(
        default=list, blank=True, help_text="Glob patterns on metric and event names; empty: all."
    )
    label_matchers = models.JSONField(
        default=list, blank=True, help_text='Label matchers such as node=~"node-0[1-9]"; all must match.'
    )
    level = models.CharField(max_length=10, choices=Level.choices, default=Level.FULL)
    masked_labels = models.JSONField(
        default=list, blank=True, help_text="Redacted level: labels replaced by stable pseudonyms."
    )
    entity_labels = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "Aggregate level: labels naming one machine, device or process (any case), besides the "
            "known ones (node, hostname, instance, gpu, uuid, …); empty: detected as the labels whose "
            "values are (nearly) unique per series."
        ),
    )
    exposed_labels = models.JSONField(
        default=list,
        blank=True,
        help_text=(
            "Aggregate level: labels (not naming an entity) the grantee may group by, match on and see "
            "values of in fleet figures; empty: none."
        ),
    )
    data_from = models.DateTimeField(null=True, blank=True, help_text="Only data at or after this time.")
    data_to = models.DateTimeField(null=True, blank=True, help_text="Only data before this time.")
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["owner__slug", "created_at"]

    def __str__(self) -> str:
        return f"{self.owner} → {self.grantee or 'everyone'}: {self.name} ({self.level})"


class AccessRequest(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DECLINED = "declined"

    requester = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="access_requests_made")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="access_requests_received")
    signals = models.JSONField(default=list, blank=True)
    name_patterns = models.JSONField(default=list, blank=True)
    reason = models.TextField()
    data_from = models.DateTimeField(null=True, blank=True)
    data_to = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    grant = models.ForeignKey(Grant, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.requester} asks {self.owner}: {self.signals or 'all'} ({self.status})"


class AuditEntry(models.Model):
    """Reads of another organisation's data: who, whose, what, which window, how, through what.

    Repeated reads of one view (same reader, owner, level and ``through``, else ``via``) less than
    :data:`orgs.audit.AUDIT_COALESCE_GAP` apart are one entry: ``count`` reads from ``at`` to
    ``last_at``, the window and ``what`` covering every one of them
    (``orgs.read_context.ReadContext.flush_audit``)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    last_at = models.DateTimeField(default=timezone.now)
    count = models.PositiveIntegerField(default=1)
    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_entries")
    viewer_org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+", null=True)
    viewer = models.CharField(max_length=200)
    what = models.CharField(max_length=500)
    level = models.CharField(max_length=10)
    window_start = models.BigIntegerField(null=True)
    window_end = models.BigIntegerField(null=True)
    via = models.CharField(max_length=500)
    # the permalink or incident (or the war room) the read was made for; blank for a read outside a view
    through = models.CharField(max_length=120, blank=True, default="")

    class Meta:
        ordering = ["-last_at", "-pk"]
        indexes = [
            models.Index(fields=["owner", "-at"]),
            models.Index(fields=["owner", "viewer", "-last_at"], name="orgs_audit_coalesce"),
        ]

    def __str__(self) -> str:
        return f"{self.viewer} read {self.owner} {self.count} x: {self.what}"


class UnsharedDescription(models.Model):
    """A family of the owner's data, described in the owner's words for those it is not shared with.

    ``name`` and ``text`` are what others read; the selector (``signals``, ``name_patterns``) stays with
    the owner and only decides where the description applies: it is shown to a viewer when some series
    it selects exist and are not shared with that viewer, and the owner discloses descriptions
    (``Organization.unshared_disclosure`` = described)."""

    owner = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="unshared_descriptions")
    name = models.CharField(max_length=80, help_text="A name others read, e.g. 'metadata service health'.")
    text = models.CharField(max_length=300, blank=True, help_text="One sentence others read.")
    signals = models.JSONField(default=list, blank=True, help_text="Signal families; empty: all (private).")
    name_patterns = models.JSONField(
        default=list, blank=True, help_text="Glob patterns on metric names; empty: all (private)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["owner__slug", "name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="unshared_description_name_unique")
        ]

    def __str__(self) -> str:
        return f"{self.owner}: {self.name}"


# The event name detections are stored under (analysis.detection.DetectionConfig.name), named
# here so the sharing of an organisation's detections can be decided without the detector.
DETECTION_EVENT_NAME = "failure_suspected"
DETECTION_GRANT_NAME = "detections of the failure detector"


class DetectorSettings(models.Model):
    """What an organisation's failure detector runs on, and where the periodic run has got to.

    ``signals`` narrows the series read to signal families (empty: all); ``name_patterns`` (metric
    globs) and ``label_matchers`` (``node=~"node-0.*"``) narrow the organisation's own series only, so
    a matcher can never probe another organisation's labels. ``include_shared``: also the series other
    organisations share with it. ``threshold`` is the sensitivity, in robust units (lower: more
    detections). ``shared_with`` gets the detections through a grant (``orgs.services``).
    ``detected_until`` (µs) is the watermark of the continuous run: data before it was detected on."""

    org = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="detector")
    enabled = models.BooleanField(default=False, help_text="Run the detector continuously over new data.")
    signals = models.JSONField(default=list, blank=True, help_text="Signal families; empty: all.")
    name_patterns = models.JSONField(
        default=list, blank=True, help_text="Glob patterns on your metric names; empty: all."
    )
    label_matchers = models.JSONField(
        default=list, blank=True, help_text='Label matchers on your series, such as node=~"node-0.*".'
    )
    include_shared = models.BooleanField(
        default=True, help_text="Also read what other organisations share with yours."
    )
    threshold = models.FloatField(
        default=8.0, help_text="Sensitivity: deviation in robust units a signal must reach (lower: more)."
    )
    shared_with = models.ManyToManyField(Organization, related_name="+", blank=True)
    detected_until = models.BigIntegerField(null=True, blank=True, help_text="Watermark of the run, µs.")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "detector settings"

    def __str__(self) -> str:
        return f"{self.org}: detector {'on' if self.enabled else 'off'}"


class DetectorRun(models.Model):
    """One run of an organisation's detector over a past window, asked for on its page; its progress
    (``done_us`` of the window) is what the page polls."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    org = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="detector_runs")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    start = models.BigIntegerField()
    end = models.BigIntegerField()
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    done_us = models.BigIntegerField(default=0)
    found = models.PositiveIntegerField(default=0)
    written = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.org}: detector run {self.pk} ({self.status})"

    @property
    def share_done(self) -> float:
        span = max(1, self.end - self.start)
        return 1.0 if self.status == self.Status.DONE else min(1.0, self.done_us / span)
