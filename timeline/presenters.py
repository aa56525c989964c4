"""The JSON shapes of series and events, as one viewer may see them.

The gate (``orgs.access``) decides — which rows a scope reads, at which level, which labels it sees
masked, whether a body is hidden; this module only applies those decisions to rows, and the clock
corrections in force for the read (``clock.model``) to event times. Every series and event that
leaves the server passes through here, so redaction happens in one place and never in templates.
"""

from __future__ import annotations

from urllib.parse import urlencode

import numpy as np
from django.db.models import Count
from django.urls import reverse

from clock import model as clock_model
from core.timeparse import format_rfc3339
from orgs.access import LEVEL_FULL, LEVEL_REDACTED, REDACTED_MESSAGE, NoScope, Scope, require_scope
from orgs.discovery import description_series_q
from orgs.models import Organization, UnsharedDescription, UnsharedDisclosure
from orgs.read_context import note_read
from timeline.models import Event, Series


def present_series(scope: Scope, series: Series) -> dict:
    """The JSON a viewer gets for one series, its masked labels pseudonymised. Raises NoScope when the
    series is not readable one by one (an aggregate grant shares it only inside a fleet figure)."""
    if not scope.readable_alone(series):
        raise NoScope("series not readable in this scope")
    level = scope.series_level(series)
    labels = scope.mask_labels(series.org_id, series.labels, scope.series_masked_labels(series))
    note_read(scope, series.org_id, f"series {series.metric}", level)
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
    note_read(scope, event.org_id, f"events {event.signal}", level)
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


def note_event_reads(scope: Scope, org_ids, signals, full) -> None:
    """Note the reads of events shown without being presented one by one (a spans lane's merged bars),
    as :func:`present_event` notes each: once per (organisation, signal, level), in order of first
    appearance. ``org_ids``, ``signals``, ``full`` (read at full level, else redacted): arrays, one
    entry per event, of events the scope reads."""
    if not len(org_ids):
        return
    seen: dict[tuple[int, str, bool], None] = dict.fromkeys(
        zip(np.asarray(org_ids).tolist(), list(signals), np.asarray(full).tolist(), strict=True)
    )
    for org_id, signal, whole in seen:
        note_read(scope, org_id, f"events {signal}", LEVEL_FULL if whole else LEVEL_REDACTED)


def unshared_summary(scope: Scope) -> list[dict]:
    """Placeholders: per other organisation that announces it, what exists of each signal family that
    this scope cannot read one by one, as the owner lets a placeholder say it
    (:func:`unshared_placeholders`). Reveals no metric name, label or value."""
    return unshared_placeholders(scope, include_aggregate=False)


# ----------------------------------------------------------------------------- placeholders
# Placeholders: what a viewer is told of other organisations' data it may not read.
#
# One entry per (owner, signal) with series the viewer may not read, where the owner announces unshared
# data (``Organization.announce_unshared``). What an entry says is the owner's decision
# (``Organization.unshared_disclosure``, :mod:`orgs.discovery`):
#
# * ``none``: that the owner keeps data of that signal not shared with the viewer;
# * ``counts`` (the default): how many series;
# * ``described``: the counts, and each description the owner published whose series exist and are
#   not shared with the viewer: its id, name and sentence (never its selector).
#
# An entry never holds a metric name, a label name or value, or anything derived from them, and its
# request-access link carries only the owner, the signal and at most a shown description's id.


def request_access_url(org: str, signal: str, family: int | None = None) -> str:
    """The sharing page's request form, opened and filled in with what the requester may see."""
    params: dict[str, str | int] = {"owner": org, "signals": signal}
    if family is not None:
        params["family"] = family
    return f"{reverse('sharing')}?{urlencode(params)}#request-access"


def _series_text(count: int) -> str:
    return f"{count:,} series"


def unshared_placeholders(scope: Scope, *, include_aggregate: bool) -> list[dict]:
    """The placeholders of ``scope``: per (owner, signal), ordered by owner and signal.

    ``include_aggregate``: whether series an aggregate grant shares only inside fleet figures count
    as shared (the war room's list, the sharing page, exports) or not (the catalogue, which counts the
    series it cannot draw one by one).

    Each entry: ``org``, ``org_name``, ``colour``, ``signal``, ``disclosure``, ``count`` (None unless
    the owner discloses counts), ``what`` ("126 series", or "data"), ``text`` ("126 series not shared
    with you"), ``request`` (the request-access link) and ``families`` (published descriptions shown
    to this viewer: ``id``, ``name``, ``text``, ``count``, ``request``)."""
    scope = require_scope(scope)
    if scope.is_system:
        return []
    hidden = (
        Series.unscoped.exclude(scope.series_filter(include_aggregate=include_aggregate))
        .exclude(scope.own_q())
        .filter(org__announce_unshared=True)
    )
    counts = {
        (row["org_id"], row["signal"]): row["count"]
        for row in hidden.values("org_id", "signal").annotate(count=Count("id")).order_by()
    }
    if not counts:
        return []
    orgs = Organization.objects.in_bulk(sorted({org_id for org_id, _ in counts}))
    families = _families(hidden, [org for org in orgs.values() if org.unshared_disclosure == "described"])
    out = []
    for (org_id, signal), count in sorted(counts.items(), key=lambda kv: (orgs[kv[0][0]].slug, kv[0][1])):
        org = orgs[org_id]
        disclosed = org.unshared_disclosure != UnsharedDisclosure.NONE
        what = _series_text(count) if disclosed else "data"
        out.append(
            {
                "org": org.slug,
                "org_name": org.name,
                "colour": org.colour,
                "signal": signal,
                "disclosure": org.unshared_disclosure,
                "count": count if disclosed else None,
                "what": what,
                "text": f"{what} not shared with you",
                "request": request_access_url(org.slug, signal),
                "families": [
                    {
                        "id": description.pk,
                        "name": description.name,
                        "text": description.text,
                        "count": shown,
                        "request": request_access_url(org.slug, signal, description.pk),
                    }
                    for description, shown in families.get((org_id, signal), [])
                ],
            }
        )
    return out


def family_text(family: dict) -> str:
    """A published description as a placeholder says it: ``name: sentence (12 series)``."""
    text = family["name"] + (f": {family['text']}" if family["text"] else "")
    return text + (f" ({family['count']:,} series)" if family["count"] else "")


def placeholder_line(placeholder: dict) -> str:
    """A placeholder in one line: ``storage · storage: 126 series not shared with you; <descriptions>``."""
    said = [f"{placeholder['org_name']} · {placeholder['signal']}: {placeholder['text']}"]
    return "; ".join(said + [family_text(family) for family in placeholder["families"]])


def _families(hidden, orgs: list[Organization]) -> dict[tuple[int, str], list[tuple]]:
    """Per (owner, signal): the owner's descriptions with some of their series in ``hidden``, and how
    many. One query for all of them."""
    if not orgs:
        return {}
    descriptions = list(UnsharedDescription.objects.filter(owner__in=orgs).order_by("owner_id", "name", "pk"))
    if not descriptions:
        return {}
    counted = (
        hidden.filter(org_id__in=[org.pk for org in orgs])
        .values("org_id", "signal")
        .annotate(**{f"d{d.pk}": Count("id", filter=description_series_q(d)) for d in descriptions})
        .order_by()
    )
    found: dict[tuple[int, str], list[tuple]] = {}
    for row in counted:
        for description in descriptions:
            shown = row[f"d{description.pk}"]
            if description.owner_id == row["org_id"] and shown:
                found.setdefault((row["org_id"], row["signal"]), []).append((description, shown))
    return found


def shown_description(scope: Scope, owner: Organization, description_id: int) -> UnsharedDescription | None:
    """The description ``description_id`` of ``owner`` if it is shown to ``scope`` now (a request-access
    link names it by id): the owner publishes descriptions and some of its series are not shared with
    the viewer. None otherwise, so an id tells nothing the placeholders do not."""
    scope = require_scope(scope)
    if (
        scope.is_system
        or scope.owns(owner.pk)
        or not owner.announce_unshared
        or owner.unshared_disclosure != UnsharedDisclosure.DESCRIBED
    ):
        return None
    description = UnsharedDescription.objects.filter(pk=description_id, owner=owner).first()
    if description is None:
        return None
    hidden = Series.unscoped.exclude(scope.series_filter(include_aggregate=True)).filter(
        description_series_q(description)
    )
    return description if hidden.exists() else None
