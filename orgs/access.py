"""The single access gate: who may read which series and events, and how redacted.

Every read of the store takes a :class:`Scope` first. A scope is built here from
a signed-in person (:meth:`Scope.for_user`) or a read token
(:meth:`Scope.for_token`); push tokens cannot read and get no scope. System jobs
(the worker, retention, the scenario loader) use :meth:`Scope.system`, whose
name is meant to make a reviewer stop.

Invariants:

* a read without a scope raises :class:`NoScope` (fail closed);
* a scope sees its own organisation's data fully, and another organisation's
  data only through that organisation's active :class:`~orgs.models.Grant`\\ s,
  each turned into a :class:`~orgs.grants.GrantRule` that is both a WHERE clause (``Q``) and
  a Python predicate — the two always agree (tests/orgs/test_grants.py);
* ``aggregate`` grants never make a per-entity series readable: per-series reads
  use :meth:`Scope.series_filter`, which leaves them out; only fleet aggregates
  over at least :data:`MIN_AGGREGATE_GROUP` series may use them (:func:`fleet_group_allowed`), grouped
  only by the labels the grant exposes. Which labels name an entity is decided per grant and metric
  (:mod:`orgs.entities`: the known names in any case, the grant's own list, or detection) once per
  scope (:meth:`Scope.fleet_policy`); lanes, PromQL and the analysis ask, they do not decide;
* redaction is decided here (:meth:`Scope.series_masked_labels`, :meth:`Scope.hides_body`,
  :meth:`Scope.mask_labels`) and applied by the read side's presenters (``timeline.presenters``),
  never in templates; this module imports neither ``timeline`` nor ``ingest``;
* every presented row of another organisation is noted in the request's read context, and the base
  views write one audit entry per owner organisation and request (:mod:`orgs.read_context`,
  :mod:`orgs.audit`);
* nothing outside ``orgs/`` reads a scope's grant rules, levels or own organisations: every decision
  the read side needs is a method here (which bodies, which labels are pseudonymised, which owners
  share, how event counts may answer, a cache identity), checked by tests/orgs/test_gate_only.py.
  That is why this module is longer than most: it is the one place access is decided.

Size: the one place access is decided, every decision the read side and the services ask for a method
or function here.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import Q

from orgs.entities import (
    KNOWN_ENTITY_LABELS,
    detected_entity_labels,
    entity_names,
    fold,
    is_known_entity_label,
    usable_names,
)
from orgs.grants import GrantRule, grant_rules_for
from orgs.models import (
    LEVEL_RANK,
    Grant,
    IngestToken,
    Level,
    Membership,
    Organization,
    Role,
    TokenPurpose,
)

LEVEL_FULL = Level.FULL.value
LEVEL_REDACTED = Level.REDACTED.value
LEVEL_AGGREGATE = Level.AGGREGATE.value
MIN_AGGREGATE_GROUP = 5
# Labels that always name one machine, device or process (in any case). A series an aggregate grant
# shares with none of its entity labels (these, the grant's own, or detected) is already a fleet
# figure (the storage array's total read rate), so it may be read as it is.
ENTITY_LABELS = KNOWN_ENTITY_LABELS
REDACTED_MESSAGE = ""
# How the gate reads the series its aggregate grants select. The store's models live above this
# module, so the read side hands the gate a reader at start-up (:func:`read_series_with`); without
# one, aggregate grants share nothing one by one (fail closed).
_series_reader: list[SeriesReader] = []
# Per-grant decisions already worked out in this process, by (rule, the grant's lists, how many series
# it selects, the highest id and the latest creation time among them): series rows never change, and
# ids only grow (the time tells apart rows that reused the ids of rows rolled back), so the same count,
# highest id and time mean the same rows. Bounded; an entry is a few dicts keyed by series id.
_decided_per_grant: OrderedDict[tuple, _GrantDecision] = OrderedDict()
DECIDED_PER_GRANT_KEPT = 256


class NoScope(PermissionDenied):
    """Raised when something tries to read without a scope, or a viewer has none."""


class SeriesReader(Protocol):
    """The store's answer to the gate: the series rows a WHERE clause selects."""

    def extent(self, where: Q) -> tuple:
        """How many rows ``where`` selects, their highest id (0 for none) and latest creation time."""

    def rows(self, where: Q) -> Iterable[tuple[int, str, dict]]:
        """(id, metric, labels) of each row ``where`` selects."""


def read_series_with(reader: SeriesReader) -> None:
    """Let the gate read the series its aggregate grants select (called once, by the store's app)."""
    _series_reader[:] = [reader]


def fleet_group_allowed(members, alone=0):
    """The fleet rule: a figure over ``members`` series, ``alone`` of them readable one by one, gives
    away no value the viewer may not read when every member is readable alone or the group holds at
    least :data:`MIN_AGGREGATE_GROUP` series. Works on numbers and on numpy arrays of them alike."""
    return (members >= MIN_AGGREGATE_GROUP) | (members == alone)


@dataclass(frozen=True)
class FleetPolicy:
    """What a scope's aggregate grants allow for each series they share, by series id.

    ``alone``: series that carry no entity label under some aggregate grant (fleet figures by
    themselves, readable one by one). ``entities``: the labels (as stored) of each shared series that
    name an entity. ``usable``: for a series readable only inside a fleet figure, the labels (as
    stored) such a figure may group by, match on and show — those a grant exposes; never an entity."""

    alone: frozenset[int] = frozenset()
    entities: Mapping[int, frozenset[str]] = field(default_factory=dict)
    usable: Mapping[int, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _GrantDecision:
    """One aggregate grant's decisions about the series it selects (see :class:`FleetPolicy`)."""

    alone: frozenset[int]
    entities: dict[int, frozenset[str]]
    usable: dict[int, frozenset[str]]


def _grant_decision(rule: GrantRule, configured: list[str], exposed: list[str]) -> _GrantDecision:
    """Per series ``rule`` selects, grouped by metric: its entity labels (the known names, the grant's
    own, or — when it names none — those detected among the metric's series), and either that it is a
    fleet figure by itself (none) or the labels a fleet figure over it may use."""
    reader = _series_reader[0]
    where = rule.series_q()
    key = (rule, tuple(configured), tuple(exposed), *reader.extent(where))
    if key in _decided_per_grant:
        _decided_per_grant.move_to_end(key)
        return _decided_per_grant[key]
    by_metric: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for pk, metric, labels in reader.rows(where):
        by_metric[metric].append((pk, labels))
    alone: set[int] = set()
    entities: dict[int, frozenset[str]] = {}
    usable: dict[int, frozenset[str]] = {}
    for members in by_metric.values():
        detected = () if configured else detected_entity_labels(labels for _, labels in members)
        names = entity_names(configured, detected)
        for pk, labels in members:
            entities[pk] = frozenset(k for k in labels if fold(k) in names)
            if entities[pk]:
                usable[pk] = usable_names(labels, names, exposed)
            else:
                alone.add(pk)
    decision = _decided_per_grant[key] = _GrantDecision(frozenset(alone), entities, usable)
    while len(_decided_per_grant) > DECIDED_PER_GRANT_KEPT:
        _decided_per_grant.popitem(last=False)
    return decision


def _fleet_policy(rules: list[GrantRule]) -> FleetPolicy:
    """The decisions of every aggregate grant in ``rules``, together: a series is a fleet figure by
    itself when one grant says so; its entity labels and usable labels are those of every grant."""
    if not rules or not _series_reader:
        return FleetPolicy()
    settings_of = {
        pk: (list(entity or ()), list(exposed or ()))
        for pk, entity, exposed in Grant.objects.filter(pk__in=[r.grant_id for r in rules]).values_list(
            "pk", "entity_labels", "exposed_labels"
        )
    }
    decisions = [_grant_decision(rule, *settings_of.get(rule.grant_id, ([], []))) for rule in rules]
    if len(decisions) == 1:
        return FleetPolicy(
            alone=decisions[0].alone, entities=decisions[0].entities, usable=decisions[0].usable
        )
    alone = frozenset().union(*(d.alone for d in decisions))
    entities: dict[int, frozenset[str]] = defaultdict(frozenset)
    usable: dict[int, frozenset[str]] = defaultdict(frozenset)
    for decision in decisions:
        for pk, names in decision.entities.items():
            entities[pk] |= names
        for pk, names in decision.usable.items():
            if pk not in alone:
                usable[pk] |= names
    return FleetPolicy(alone=alone, entities=dict(entities), usable=dict(usable))


@dataclass(frozen=True)
class Scope:
    """What one viewer may read: decisions only. Build a new one per request; what the request read is
    noted in its read context (:mod:`orgs.read_context`), not here."""

    viewer_org_id: int | None
    viewer: str
    own_org_ids: frozenset[int] = field(default_factory=frozenset)
    rules: tuple[GrantRule, ...] = ()
    is_system: bool = False
    # Organisations whose ingest journal (batch status) this scope may read. A push token's scope has
    # its organisation here and nothing in ``own_org_ids``: it reads no series, event or incident.
    journal_org_ids: frozenset[int] = field(default_factory=frozenset)
    # Decisions worked out once per scope (a scope lives for one request): the fleet policy, each
    # stored series' level. Not an argument, so a copy made with other rules (``dataclasses.replace``)
    # decides afresh.
    _decided: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    # -- construction ---------------------------------------------------------
    @classmethod
    def _for_org(cls, org_id: int, viewer: str) -> Scope:
        return cls(
            viewer_org_id=org_id,
            viewer=viewer,
            own_org_ids=frozenset({org_id}),
            rules=grant_rules_for(org_id),
            journal_org_ids=frozenset({org_id}),
        )

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser) -> Scope:
        if not getattr(user, "is_authenticated", False):
            raise NoScope("sign in to read data")
        membership = Membership.objects.filter(user_id=user.pk).first()
        if membership is None:
            raise NoScope("this account belongs to no organisation")
        return cls._for_org(membership.org_id, f"user:{user.get_username()}")

    @classmethod
    def for_token(cls, token: IngestToken) -> Scope:
        if token.purpose != TokenPurpose.READ or not token.is_active:
            raise NoScope("push tokens are write-only; create a read token to read data")
        return cls._for_org(token.org_id, f"token:{token.org.slug}/{token.name}")

    @classmethod
    def for_push_token(cls, token: IngestToken) -> Scope:
        """An agent's scope: the status of its organisation's own pushes, and nothing of the store."""
        if token.purpose != TokenPurpose.PUSH or not token.is_active:
            raise NoScope("not an active push token")
        return cls(
            viewer_org_id=token.org_id,
            viewer=f"token:{token.org.slug}/{token.name}",
            journal_org_ids=frozenset({token.org_id}),
        )

    @classmethod
    def dangerously_as_org(cls, org_id: int, viewer: str) -> Scope:
        """What ``org_id``'s members may read, with no person or token behind it. Only for jobs that act
        for an organisation (a snapshot part frozen for a participant, a detector, a clock estimate run
        from the command line): a request must get its scope from :func:`scope_for_request`."""
        return cls._for_org(org_id, viewer)

    @classmethod
    def system(cls) -> Scope:
        """Everything, unredacted. Only for jobs no request can reach (workers, retention, loaders)."""
        return cls(viewer_org_id=None, viewer="system", is_system=True)

    # -- WHERE clauses --------------------------------------------------------
    def series_filter(self, *, include_aggregate: bool = False) -> Q:
        """Rows of ``Series`` this scope may read one by one: own, full and redacted grants, and under
        aggregate grants the fleet-level series (no entity label: :meth:`fleet_policy`). With
        ``include_aggregate``, also the per-entity series of aggregate grants, for fleet aggregates
        only."""
        if self.is_system:
            return Q()
        q = self.own_q()
        for rule in self.rules:
            if rule.level != LEVEL_AGGREGATE or include_aggregate:
                q |= rule.series_q()
        alone = self.fleet_policy().alone
        if alone and not include_aggregate:
            q |= Q(pk__in=sorted(alone))
        return q

    def event_filter(self) -> Q:
        """Rows of ``Event`` this scope may read. Aggregate grants share no events."""
        if self.is_system:
            return Q()
        q = self.own_q()
        for rule in self.rules:
            if rule.level != LEVEL_AGGREGATE:
                q |= rule.event_q()
        return q

    def incident_filter(self) -> Q:
        """Incidents this scope may open: its organisation owns or participates in them."""
        if self.is_system:
            return Q()
        own = sorted(self.own_org_ids)
        return Q(owner_id__in=own) | Q(participants__in=own)

    def own_q(self, field: str = "org_id") -> Q:
        """Rows whose ``field`` names this scope's own organisation (nothing for a scope without one)."""
        own = sorted(self.own_org_ids)
        return Q(**{f"{field}__in": own}) if own else Q(pk__in=[])

    def body_readable_q(self) -> Q:
        """Events whose message and attributes this scope may read: its own and those a full grant
        shares (:meth:`hides_body` decides one event the same way)."""
        if self.is_system:
            return Q()
        bodies = self.own_q()
        for rule in self.rules:
            if rule.level == LEVEL_FULL:
                bodies |= rule.event_q()
        return bodies

    def grant_event_q(self, grant_id: int) -> Q:
        """Rows of ``Event`` the grant ``grant_id`` of this scope shares (nothing for any other grant or
        one beyond events: aggregate grants share no events)."""
        q = Q(pk__in=[])
        for rule in self.rules:
            if rule.grant_id == grant_id and rule.level != LEVEL_AGGREGATE:
                q |= rule.event_q()
        return q

    def pseudonymised_events_q(self, name: str) -> Q:
        """Events whose resource label ``name`` this scope sees pseudonymised: neither its own nor shared
        by a full grant, and the first redacted grant that shares them masks ``name``
        (:meth:`event_masked_labels` decides one event the same way)."""
        if self.is_system:
            return Q(pk__in=[])
        masked, earlier, unmasked = Q(pk__in=[]), Q(pk__in=[]), self.own_q()
        for rule in self.rules:
            if rule.level == LEVEL_FULL:
                unmasked |= rule.event_q()
            elif rule.level == LEVEL_REDACTED:
                if name in rule.masked_labels:
                    masked |= rule.event_q() & ~earlier
                earlier |= rule.event_q()
        return masked & ~unmasked

    def redacted_label_names(self) -> frozenset[str]:
        """Label names some redacted grant of this scope masks (for some of its rows)."""
        if self.is_system:
            return frozenset()
        return frozenset(name for r in self.rules if r.level == LEVEL_REDACTED for name in r.masked_labels)

    def grant_masked_label_names(self) -> frozenset[str]:
        """Label names any grant of this scope names as masked (whatever its level): a filter on them
        is not pushed to the database for shared rows."""
        if self.is_system:
            return frozenset()
        return frozenset(name for rule in self.rules for name in rule.masked_labels)

    def owners_masking(self, name: str) -> list[int]:
        """Organisations that share with this scope under a grant masking label ``name``."""
        return sorted({rule.owner_id for rule in self.rules if name in rule.masked_labels})

    def has_aggregate_grants(self) -> bool:
        """Whether some grant shares series with this scope at aggregate level only."""
        return not self.is_system and any(rule.level == LEVEL_AGGREGATE for rule in self.rules)

    def aggregate_series_q(self) -> Q:
        """Series rows this scope's aggregate grants select (per-entity ones included), for fleet
        figures; what of them may be used is :meth:`fleet_policy`'s."""
        q = Q(pk__in=[])
        for rule in self.rules:
            if rule.level == LEVEL_AGGREGATE:
                q |= rule.series_q()
        return q

    def sharing_owner_ids(self) -> frozenset[int]:
        """Organisations that share something with this scope under a grant."""
        return frozenset(rule.owner_id for rule in self.rules)

    def readable_owner_ids(self) -> frozenset[int]:
        """This scope's own organisations and those sharing with it."""
        return frozenset(self.own_org_ids) | self.sharing_owner_ids()

    def shares_unaggregated(self, owner_id: int) -> bool:
        """Whether ``owner_id`` shares something with this scope beyond aggregates (or is its own)."""
        if self.owns(owner_id):
            return True
        return any(rule.owner_id == owner_id and rule.level != LEVEL_AGGREGATE for rule in self.rules)

    def event_signals_shared(self) -> dict[int, frozenset[str]]:
        """Per organisation sharing events with this scope one by one (beyond aggregates), the signals
        granted (``"*"``: every signal)."""
        granted: dict[int, set[str]] = {}
        for rule in self.rules:
            if rule.level != LEVEL_AGGREGATE:
                granted.setdefault(rule.owner_id, set()).update(rule.signals or ("*",))
        return {owner: frozenset(signals) for owner, signals in granted.items()}

    def grants_in_force(self) -> list[dict]:
        """The grants this scope reads under, as a record (``grant``, ``owner``, ``level``)."""
        return [{"grant": rule.grant_id, "owner": rule.owner_id, "level": rule.level} for rule in self.rules]

    def level_through_grants(
        self,
        owner_id: int,
        *,
        series_readable: Callable[[Q], bool],
        events_readable: Callable[[int], bool],
        narrowed: bool = False,
    ) -> tuple[str | None, tuple[str, ...]]:
        """The best level at which this scope reads some of ``owner_id``'s rows of a kind (a clock
        correction's shifted data, say), and the labels that grant masks: full for its own; otherwise
        the best grant of the owner under which ``series_readable(grant's series Q)`` holds, or, for a
        grant beyond aggregates, ``events_readable(grant's id)`` (of the events :meth:`grant_event_q`
        selects). A ``narrowed`` kind (selected by labels) is not readable through an aggregate grant,
        which shares no entity."""
        if self.owns(owner_id):
            return LEVEL_FULL, ()
        best, masked = None, ()
        for rule in self.rules:
            if rule.owner_id != owner_id or (best and LEVEL_RANK[rule.level] <= LEVEL_RANK[best]):
                continue
            readable = series_readable(rule.series_q())
            if not readable and rule.level != LEVEL_AGGREGATE:
                readable = events_readable(rule.grant_id)
            if readable and not (rule.level == LEVEL_AGGREGATE and narrowed):
                best, masked = rule.level, rule.masked_labels
        return best, masked

    def event_count_access(self, org_id: int, signal: str) -> tuple[int | None, int | None, bool] | None:
        """What of ``org_id``'s ``signal`` events this scope may read, in terms the counts can answer:
        ``(lo, hi, by_name)``, the stored-time window (None: unbounded; ``lo >= hi``: nothing) and
        whether the names must be asked one by one (every grant names patterns). None: the grants
        depend on the events' resource labels, or differ in time window by name; count raw."""
        if self.owns(org_id):
            return None, None, False
        rules = [
            rule
            for rule in self.rules
            if rule.owner_id == org_id
            and rule.level != LEVEL_AGGREGATE
            and (not rule.signals or signal in rule.signals)
        ]
        if not rules:
            return 0, 0, False
        if any(rule.matchers for rule in rules):
            return None
        by_name = all(rule.name_patterns for rule in rules)
        windows = {(rule.data_from, rule.data_to) for rule in rules}
        if len(windows) == 1:
            lo, hi = windows.pop()
            return lo, hi, by_name
        if any(rule.name_patterns for rule in rules):
            return None
        low, high = -(2**63), 2**63
        spans = sorted((low if a is None else a, high if b is None else b) for a, b in windows)
        start, end = spans[0]
        for a, b in spans[1:]:
            if a > end:
                return None  # readable in two separate windows: count raw
            end = max(end, b)
        return (None if start == low else start), (None if end == high else end), False

    def cache_identity(self) -> tuple:
        """What decides this scope's answers, for a cache key shared by scopes that read alike."""
        return (
            ("viewer", self.viewer_org_id, tuple(sorted(self.own_org_ids)), self.is_system),
            ("grants", tuple(repr(rule) for rule in self.rules)),
        )

    def owns(self, org_id: int | None) -> bool:
        """Whether ``org_id`` is this scope's own organisation (a system scope owns everything)."""
        return self.is_system or org_id in self.own_org_ids

    # -- per-row decisions ----------------------------------------------------
    def _best_rule(self, matches) -> GrantRule | None:
        best = None
        for rule in self.rules:
            if matches(rule) and (best is None or LEVEL_RANK[rule.level] > LEVEL_RANK[best.level]):
                best = rule
        return best

    def series_level(self, series) -> str | None:
        """``full``, ``redacted``, ``aggregate`` or None. Per-series reads need :meth:`readable_alone`."""
        if self.is_system or series.org_id in self.own_org_ids:
            return LEVEL_FULL
        if series.pk is None:
            rule = self._best_rule(lambda r: r.matches_series(series))
            return rule.level if rule else None
        # A stored series' organisation, signal, name and labels never change: decided once a request
        # (a lane of a few hundred series asks for each of them twice, through readable_alone too).
        levels = self._decided.setdefault("series_level", {})
        if series.pk not in levels:
            rule = self._best_rule(lambda r: r.matches_series(series))
            levels[series.pk] = rule.level if rule else None
        return levels[series.pk]

    def fleet_policy(self) -> FleetPolicy:
        """What this scope's aggregate grants allow per series (:class:`FleetPolicy`), worked out on
        first use and kept for the scope's life (one request)."""
        if "fleet" not in self._decided:
            rules = [] if self.is_system else [r for r in self.rules if r.level == LEVEL_AGGREGATE]
            self._decided["fleet"] = _fleet_policy(rules)
        return self._decided["fleet"]

    def readable_alone(self, series) -> bool:
        """May this series be drawn on its own (not only inside a fleet aggregate)?"""
        level = self.series_level(series)
        if level == LEVEL_AGGREGATE:
            return series.pk in self.fleet_policy().alone
        return level is not None

    def fleet_readable(self, series: Iterable) -> bool:
        """May this group of readable series be drawn as one fleet aggregate? Always when each may be
        read alone; otherwise only as a group of at least :data:`MIN_AGGREGATE_GROUP`, so an aggregate
        never stands for one or two hidden series."""
        series = list(series)
        return bool(fleet_group_allowed(len(series), sum(1 for s in series if self.readable_alone(s))))

    def entity_labels_for(self, series) -> frozenset[str]:
        """The labels of ``series`` (as stored) that name an entity for this scope: under an aggregate
        grant as the grant decides (:meth:`fleet_policy`), otherwise the known names in any case."""
        if self.series_level(series) == LEVEL_AGGREGATE:
            found = self.fleet_policy().entities.get(series.pk)
            if found is not None:
                return found
        return frozenset(name for name in series.labels if is_known_entity_label(name))

    def fleet_labels(self, series) -> frozenset[str]:
        """The labels (as stored) a fleet figure over ``series`` — a series this scope reads only in
        aggregate — may group by, match on and show: those its aggregate grants expose, never one
        naming an entity (none for any other series)."""
        return self.fleet_policy().usable.get(series.pk, frozenset())

    def series_time_bounds(self, series) -> tuple[int | None, int | None]:
        """The part of a series' time this scope may read (µs; None: unbounded)."""
        if self.is_system or series.org_id in self.own_org_ids:
            return None, None
        rules = [r for r in self.rules if r.matches_series(series)]
        if not rules:
            return 0, 0
        starts = [r.data_from for r in rules]
        ends = [r.data_to for r in rules]
        return (None if None in starts else min(starts)), (None if None in ends else max(ends))

    def event_level(self, event) -> str | None:
        if self.is_system or event.org_id in self.own_org_ids:
            return LEVEL_FULL
        rule = self._best_rule(lambda r: r.level != LEVEL_AGGREGATE and r.matches_event(event))
        return rule.level if rule else None

    def topology_readable(self, owner_id: int, signal: str) -> bool:
        """May this scope read the dependencies ``owner_id`` pushed under ``signal``? Own ones always;
        another organisation's through a full or redacted grant that would share an event of that
        signal named ``topology`` (an aggregate grant shares no entity, so no edge)."""
        if self.is_system or owner_id in self.own_org_ids:
            return True
        record = _TopologyRecord(owner_id, signal)
        return any(r.level != LEVEL_AGGREGATE and r.matches_series(record) for r in self.rules)

    def topology_masked_labels(self, owner_id: int, signal: str) -> tuple[str, ...]:
        """The label names whose values this scope sees pseudonymised in the dependencies ``owner_id``
        pushed under ``signal`` (the grant that shares them is redacted): an entity of such a kind is
        named by the pseudonym a series label of that name would get, and by nothing else."""
        if self.is_system or owner_id in self.own_org_ids:
            return ()
        record = _TopologyRecord(owner_id, signal)
        rule = self._best_rule(lambda r: r.level != LEVEL_AGGREGATE and r.matches_series(record))
        return rule.masked_labels if rule is not None and rule.level == LEVEL_REDACTED else ()

    # -- redaction decisions (the read side shapes rows with them: timeline.presenters) --
    def series_masked_labels(self, series) -> tuple[str, ...]:
        """The label names of ``series`` this scope sees pseudonymised (none at full level)."""
        if self.series_level(series) != LEVEL_REDACTED:
            return ()
        rule = self._best_rule(lambda r: r.matches_series(series))
        return rule.masked_labels if rule else ()

    def event_masked_labels(self, event) -> tuple[str, ...]:
        """The resource label names of ``event`` this scope sees pseudonymised."""
        if self.event_level(event) != LEVEL_REDACTED:
            return ()
        rule = self._best_rule(lambda r: r.level == LEVEL_REDACTED and r.matches_event(event))
        return rule.masked_labels if rule else ()

    def hides_body(self, event) -> bool:
        """Whether this scope may not see ``event``'s message and attributes (redacted level)."""
        return self.event_level(event) == LEVEL_REDACTED

    def mask_labels(self, owner_id: int, labels: dict, masked: tuple[str, ...]) -> dict:
        """``labels`` with the ``masked`` names replaced by this viewer's pseudonyms."""
        if not masked:
            return dict(labels)
        return {
            name: pseudonym(owner_id, self.viewer_org_id, name, value) if name in masked else value
            for name, value in labels.items()
        }

    def organizations(self):
        """Organisations whose names and colours this viewer may see: its own and those sharing with it."""
        if self.is_system:
            return Organization.objects.all()
        return Organization.objects.filter(pk__in=sorted(self.readable_owner_ids()))


@dataclass(frozen=True)
class _TopologyRecord:
    """What a grant's selector is matched against for an organisation's pushed topology."""

    org_id: int
    signal: str
    metric: str = "topology"
    labels: Mapping[str, str] = field(default_factory=dict)


def pseudonym(owner_id: int, viewer_org_id: int | None, name: str, value: str) -> str:
    """A stable stand-in for a masked label value: the same for one viewer organisation, different for
    another, so two organisations cannot join their redacted views."""
    key = settings.SECRET_KEY.encode()
    digest = hmac.new(key, f"{owner_id}:{viewer_org_id}:{name}:{value}".encode(), hashlib.sha256).hexdigest()
    return f"{name}~{digest[:8]}"


def require_scope(scope: Scope | None) -> Scope:
    if not isinstance(scope, Scope):
        raise NoScope("a read of the store needs a Scope; build one in orgs.access")
    return scope


def scope_for_request(request, *, push_tokens: bool = False) -> Scope:
    """The scope of an HTTP request: a read token, the signed-in person, or — where the endpoint
    serves agents (``push_tokens``) — a push token's journal-only scope."""
    token = getattr(request, "auth", None)
    if isinstance(token, IngestToken):
        if push_tokens and token.purpose == TokenPurpose.PUSH:
            return Scope.for_push_token(token)
        return Scope.for_token(token)
    return Scope.for_user(request.user)


def journal_filter(scope: Scope) -> Q:
    """Ingest journal entries (``IngestBatch``) this scope may see: its organisations' own."""
    scope = require_scope(scope)
    if scope.is_system:
        return Q()
    return Q(org_id__in=sorted(scope.journal_org_ids)) if scope.journal_org_ids else Q(pk__in=[])


# --------------------------------------------------------------------------- writes

ROLE_RANK = {Role.VIEWER: 0, Role.ANALYST: 1, Role.ADMIN: 2}


def require_role(user, role: str, *, action: str) -> Membership:
    """The membership of ``user`` when it holds at least ``role`` (viewer < analyst < admin); otherwise
    PermissionDenied saying who may do ``action`` (a phrase: "change incidents"). Every write path
    asks this one function, so the rule and its wording are the same everywhere."""
    membership = getattr(user, "membership", None) if user is not None else None
    if membership is None:
        raise PermissionDenied(f"only people of an organisation can {action}")
    if ROLE_RANK.get(membership.role, -1) < ROLE_RANK[role]:
        who = "your organisation's admins" if role == Role.ADMIN else "analysts and admins"
        raise PermissionDenied(f"only {who} can {action}; you are a {membership.role}")
    return membership


def require_owner_or_admin(user, *, created_by_id: int | None, org_id: int, action: str) -> Membership:
    """The membership of ``user`` when they created the object (``created_by_id``) or are an admin of
    the organisation it belongs to (``org_id``); otherwise PermissionDenied: "only its creator or their
    organisation's admins can ``action``" (a phrase: "revoke a link"). Someone of no organisation hears
    :func:`require_role`'s wording. Every creator-or-admin write (revoking a permalink or a snapshot)
    asks this one function."""
    membership = require_role(user, Role.VIEWER, action=action)
    if created_by_id is not None and created_by_id == user.pk:
        return membership
    if membership.is_admin and membership.org_id == org_id:
        return membership
    raise PermissionDenied(f"only its creator or their organisation's admins can {action}")
