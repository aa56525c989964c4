"""The JSON shapes of series and events, as one viewer may see them.

The gate (``orgs.access``) decides — which rows a scope reads, at which level, which labels it sees
masked, whether a body is hidden; this module only applies those decisions to rows, and the clock
corrections in force for the read (``timeline.clock.model``) to event times. Every series and event that
leaves the server passes through here, so redaction happens in one place and never in templates.
"""

from __future__ import annotations

from collections import Counter

from core.timeparse import format_rfc3339
from orgs.access import REDACTED_MESSAGE, NoScope, Scope
from timeline.clock import model as clock_model
from timeline.models import Event, Series


def present_series(scope: Scope, series: Series) -> dict:
    """The JSON a viewer gets for one series, its masked labels pseudonymised. Raises NoScope when the
    series is not readable one by one (an aggregate grant shares it only inside a fleet figure)."""
    if not scope.readable_alone(series):
        raise NoScope("series not readable in this scope")
    level = scope.series_level(series)
    labels = scope.mask_labels(series.org_id, series.labels, scope.series_masked_labels(series))
    scope.note_read(series.org_id, f"series {series.metric}", level)
    return {
        "id": series.pk,
        "org": series.org.slug,
        "org_name": series.org.name,
        "colour": series.org.colour,
        "signal": series.signal,
        "metric": series.metric,
        "labels": labels,
        "kind": series.kind,
        "unit": series.unit,
        "level": level,
    }


def present_event(scope: Scope, event: Event) -> dict:
    """The JSON a viewer gets for one event: at the redacted level the message and attributes are
    hidden and the masked resource labels pseudonymised. Raises NoScope when not readable. Times carry
    the clock corrections in force for this read; ``clock_shift_us`` (and ``clock_end_shift_us``) say by
    how much, when they moved it."""
    level = scope.event_level(event)
    if level is None:
        raise NoScope("event not readable in this scope")
    hidden = scope.hides_body(event)
    resource = scope.mask_labels(event.org_id, event.resource, scope.event_masked_labels(event))
    scope.note_read(event.org_id, f"events {event.signal}", level)
    shift, end_shift, _used = clock_model.clock_for(scope).event_shift(event)
    presented = {
        "id": event.pk,
        "org": event.org.slug,
        "colour": event.org.colour,
        "signal": event.signal,
        "ts": format_rfc3339(event.ts + shift),
        "end_ts": format_rfc3339(event.end_ts + end_shift) if event.end_ts is not None else None,
        "kind": event.kind,
        "severity": event.severity,
        "name": event.name,
        "message": REDACTED_MESSAGE if hidden else event.message,
        "redacted": hidden,
        "resource": resource,
        "attributes": {} if hidden else event.attributes,
        "level": level,
    }
    if shift or end_shift:
        presented["clock_shift_us"] = shift
        presented["clock_end_shift_us"] = end_shift
    return presented


def unshared_summary(scope: Scope) -> list[dict]:
    """Placeholders: per other organisation that announces it, how many series of each signal family
    exist that this scope cannot read one by one. Reveals nothing else."""
    if scope.is_system:
        return []
    hidden = (
        Series.unscoped.exclude(scope.series_filter())
        .filter(org__announce_unshared=True)
        .values_list("org__slug", "org__name", "org__colour", "signal")
    )
    counts = Counter(hidden)
    return [
        {"org": slug, "org_name": name, "colour": colour, "signal": signal, "count": count}
        for (slug, name, colour, signal), count in sorted(counts.items())
    ]
