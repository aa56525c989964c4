"""The clock model of a read: which corrections are in force for a request, and how a viewer sees them.

A correction changes what is *read*, never what is stored (see :mod:`clock`). One request
reads with one clock model, kept by its read context (:mod:`orgs.read_context`) and resolved once per
request: :func:`use_clock` turns corrections on or off for a block (``align=off``), :func:`clock_for`
finds the model, :func:`read_hints` hands it to the store. A correction of
another organisation is listed only to viewers who can read some of the data it shifts, with masked
label values pseudonymised as the grant masks them (:func:`present_corrections`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from django.db.models import Q

from core.labels import SelectorError, parse_matcher
from core.timeparse import MAX_US, MIN_US, format_rfc3339
from orgs.access import (
    LEVEL_REDACTED,
    Scope,
    pseudonym,
    require_scope,
)
from orgs.grants import parse_sql_matcher
from orgs.read_context import current_read, note_read, reading
from store import get_store
from store.hints import ClockModel, Correction, EventMatch, ReadHints
from timeline.models import ClockCorrection, Series

# Every time an event can be stored at, in stored time: reads of events wherever they are (the store
# decides whether they live in the Django database or elsewhere), not of one window.
ALL_STORED_TIME = ReadHints(start=MIN_US, end=MAX_US + 1)


def correction_from_row(row: ClockCorrection) -> Correction:
    """An active :class:`ClockCorrection` as the read path uses it."""
    return Correction(
        id=row.pk,
        org_id=row.org_id,
        source_id=row.source_id,
        matcher=parse_matcher(row.label_matcher) if row.label_matcher else None,
        offset_us=row.offset_us,
        drift_us_per_hour=row.drift_us_per_hour,
        reference_us=row.reference_ts if row.reference_ts is not None else (row.valid_from or 0),
        valid_from=row.valid_from,
        valid_to=row.valid_to,
    )


def resolve_clock(scope: Scope, *, aligned: bool = True) -> ClockModel:
    """Active corrections of the organisations whose data ``scope`` may read at all."""
    scope = require_scope(scope)
    if not aligned:
        return ClockModel((), aligned=False)
    rows = ClockCorrection.objects.filter(active=True)
    if not scope.is_system:
        rows = rows.filter(org_id__in=sorted(scope.readable_owner_ids()))
    usable = [row for row in rows.order_by("pk") if _matcher_usable(row)]
    return ClockModel(tuple(correction_from_row(row) for row in usable), aligned=True)


def _matcher_usable(row: ClockCorrection) -> bool:
    """A stored matcher refused under today's rules (``manage.py check_grants`` lists it) leaves its
    correction out rather than failing every read of the organisation's data."""
    try:
        return not row.label_matcher or bool(parse_sql_matcher(row.label_matcher))
    except SelectorError:
        return False


def clock_for(scope: Scope) -> ClockModel:
    """The clock model reads through ``scope`` use: its read context's, resolved once per context and
    alignment (:class:`orgs.read_context.ReadContext`); outside a context reading through ``scope``, its
    active corrections as they are now."""
    context = current_read(scope)
    if context is None:
        return resolve_clock(scope)
    return context.clock(resolve_clock)


@contextlib.contextmanager
def use_clock(scope: Scope, *, aligned: bool = True) -> Iterator[ClockModel]:
    """Read through ``scope`` with corrections on (default) or off, for the duration of the block: in
    the request's read context when it reads through ``scope`` (same audit log), else in one of the
    block's own (:func:`orgs.read_context.reading`)."""
    with reading(scope, aligned=aligned) as context:
        yield context.clock(resolve_clock)


def read_hints(scope: Scope, *, start: int, end: int, **hints) -> ReadHints:
    """The store read hints of a read through ``scope`` over ``[start, end)``, with the clock model the
    request reads with (:func:`clock_for`); ``hints``: the other :class:`ReadHints` fields."""
    return ReadHints(start=start, end=end, clock=clock_for(scope), **hints)


def aligned_param(value: str | None) -> bool:
    """``align`` request parameter: ``off``/``0``/``false``/``no`` turn corrections off; default on."""
    return (value or "on").strip().lower() not in ("off", "0", "false", "no")


# --------------------------------------------------------------------------- presenting corrections


def _visible_level(scope: Scope, row: ClockCorrection) -> tuple[str | None, tuple[str, ...]]:
    """The level at which ``scope`` may see a correction, and the labels it masks: the best level of
    a grant under which the viewer can read some of the data the correction shifts."""
    correction = correction_from_row(row)

    def series_readable(grant: Q) -> bool:
        return Series.unscoped.filter(grant & correction.q("labels")).exists()

    def events_readable(grant_id: int) -> bool:
        # the viewer's events under this grant (one of the scope's own: nothing else is added)
        shifted = correction.event_match() & EventMatch(grant=grant_id)
        return get_store().any_events(scope, ALL_STORED_TIME, match=shifted)

    return scope.level_through_grants(
        row.org_id,
        series_readable=series_readable,
        events_readable=events_readable,
        narrowed=correction.matcher is not None,
    )


def present_correction(
    scope: Scope, row: ClockCorrection, *, level: str, masked: tuple[str, ...] = ()
) -> dict:
    matcher = row.label_matcher
    if matcher and level == LEVEL_REDACTED:
        name, op, value = parse_matcher(matcher)
        if name in masked:
            shown = (
                pseudonym(row.org_id, scope.viewer_org_id, name, value) if op in ("=", "!=") else "(masked)"
            )
            matcher = f'{name}{op}"{shown}"'
    own = scope.owns(row.org_id)
    return {
        "id": row.pk,
        "org": row.org.slug,
        "source": row.source.name if row.source_id else None,
        "labels": matcher,
        "offset_ms": row.offset_us / 1000,
        "drift_ms_per_hour": row.drift_us_per_hour / 1000,
        "reference": format_rfc3339(row.reference_ts) if row.reference_ts is not None else None,
        "valid_from": format_rfc3339(row.valid_from) if row.valid_from is not None else None,
        "valid_to": format_rfc3339(row.valid_to) if row.valid_to is not None else None,
        "origin": row.origin,
        "method": row.method,
        "uncertainty_ms": row.uncertainty_us / 1000,
        "active": row.active,
        "note": row.note if own else "",
        "created_by": (row.created_by.get_username() if row.created_by else None) if own else None,
        "created_at": row.created_at.isoformat(),
        "level": level,
    }


def present_corrections(scope: Scope, rows: Iterable[ClockCorrection]) -> list[dict]:
    """Corrections as ``scope`` may see them: only those shifting data it can read."""
    out = []
    for row in rows:
        level, masked = _visible_level(scope, row)
        if level is not None:
            out.append(present_correction(scope, row, level=level, masked=masked))
            note_read(scope, row.org_id, "clock corrections", level)
    return out


def corrections_list(scope: Scope, *, include_inactive: bool = False) -> list[dict]:
    """Every correction ``scope`` may see (the active ones, unless ``include_inactive``), oldest first."""
    scope = require_scope(scope)
    rows = ClockCorrection.objects.select_related("org", "source", "created_by")
    if not include_inactive:
        rows = rows.filter(active=True)
    if not scope.is_system:
        rows = rows.filter(org_id__in=sorted(scope.readable_owner_ids()))
    return present_corrections(scope, rows.order_by("pk"))


def clock_state(scope: Scope) -> dict:
    """What a view records of its clock: aligned or not, and the corrections in force (as listed to
    ``scope``). Permalinks and snapshots carry it."""
    model = clock_for(scope)
    rows = ClockCorrection.objects.filter(pk__in=[c.id for c in model.corrections]).select_related(
        "org", "source", "created_by"
    )
    return {"aligned": model.aligned, "corrections": present_corrections(scope, rows.order_by("pk"))}
