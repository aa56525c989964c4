"""An :class:`~store.hints.EventMatch` as a condition over the Django ``Event`` model (a ``Q``), for the
event reads of the relational stores (:mod:`store.event_reads`). What the viewer may read — a
message, a pseudonymised label, a grant's share — is asked of the gate (:class:`orgs.access.Scope`);
nothing here decides it. The ``Q`` stays inside the store: callers pass the match.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Q

from orgs.access import Scope
from orgs.grants import label_q
from store.hints import EventMatch

TextCandidates = Callable[[str], list[int] | None]

# EventMatch's choices and the Event fields they choose among
MATCH_FIELDS = (
    ("ids", "pk"),
    ("org_ids", "org_id"),
    ("org_slugs", "org__slug"),
    ("source_ids", "source_id"),
    ("signals", "signal"),
    ("kinds", "kind"),
    ("names", "name"),
    ("severities", "severity"),
)


def match_q(scope: Scope, match: EventMatch, text_candidates: TextCandidates) -> Q:
    """``match`` as a condition over ``Event`` fields; ``text_candidates(text)``: the ids of the events
    a text index finds for a text, or None (no index, or too many)."""
    condition = Q()
    for name, field in MATCH_FIELDS:
        values = getattr(match, name)
        if values is not None:
            condition &= _one_of(field, values)
    if match.name_prefix:
        condition &= Q(name__startswith=match.name_prefix)
    if match.exclude_kinds:
        condition &= ~_one_of("kind", match.exclude_kinds)
    if match.exclude_names:
        condition &= ~_one_of("name", match.exclude_names)
    for key, value in match.labels:
        condition &= Q(**{f"resource__{key}": value})
    for matcher in match.matchers:
        condition &= label_q("resource", *matcher)
    for key in match.has_labels:
        condition &= Q(resource__has_key=key)
    if match.stored_from is not None:
        condition &= Q(ts__gte=match.stored_from)
    if match.duration is not None:
        condition &= Q(end_ts__isnull=not match.duration)
    if match.with_message:
        condition &= ~Q(message="")
    return condition & _viewer_q(scope, match, text_candidates)


def _viewer_q(scope: Scope, match: EventMatch, text_candidates: TextCandidates) -> Q:
    """The conditions of ``match`` on what the viewer may read, each the gate's."""
    condition = Q()
    if match.text:
        condition &= _text_q(scope, match.text, text_candidates)
    if match.readable_bodies:
        condition &= scope.body_readable_q()
    for label, seen in match.pseudonymised:
        masked = scope.pseudonymised_events_q(label)
        condition &= masked if seen else ~masked
    if match.grant is not None:
        condition &= scope.grant_event_q(match.grant)
    return condition


def _text_q(scope: Scope, text: str, text_candidates: TextCandidates) -> Q:
    """Events whose name, or whose message where the viewer may read it (the gate's
    ``body_readable_q``), contains ``text`` (case insensitive). Where the engine has a text index
    (``capabilities.text_index``), the text is matched first, alone, through it (the planner would
    otherwise walk the scope's org/time index and filter a million rows); a text so common that the
    candidates overflow is left to the plain query."""
    found = Q(name__icontains=text) | (Q(message__icontains=text) & scope.body_readable_q())
    candidates = text_candidates(text)
    return found if candidates is None else Q(pk__in=candidates) & found


def _one_of(field: str, values: tuple) -> Q:
    return Q(**{field: values[0]}) if len(values) == 1 else Q(**{f"{field}__in": values})
