"""What Grafana's label browser and metric picker ask: series, label names, label values, metadata.

Every answer lists exactly what a query may use (tests/timeline/test_promql_metadata.py checks them
against ``count by`` queries for each grant level). It is built from the series the scope may read
one by one, with their labels as shown to it (:func:`promql.selection.visible_labels`): a
masked value appears only as the viewer's pseudonym, and no series of an organisation that shares
nothing is ever looked at. Series an aggregate grant shares only as fleet figures count as a fleet
query sees them (:meth:`~promql.selection.ScopedSeries.fleet_only`): by their metric name,
owner and the labels the grant exposes, and a label set or value only where enough of them share it
for the gate's fleet rule (``orgs.access.fleet_group_allowed``) — never an entity label or a value
of one series. The series each answer is built from are noted for the audit. With a ``window``
(``start``/``end``), only the series with a sample in it (both ends included, in corrected time, cut
by the grant's time window) count; the store counts them in one bucket per series
(:meth:`~store.base.StoreBackend.select_buckets`). Without one, every readable series.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from clock.model import clock_for
from orgs.access import LEVEL_AGGREGATE, Scope, fleet_group_allowed
from orgs.read_context import note_read
from promql.engine import selector_matchers
from promql.fleet import FLEET_ONLY
from promql.parse import parse_selector
from promql.selection import ScopedSeries, visible_labels
from promql.values import NAME, Labels, label_key
from store import ReadHints, get_store
from timeline.models import Series

Window = tuple[int, int] | None


def _readable(scope: Scope, selectors: list[str], window: Window = None) -> list[tuple[Series, Labels]]:
    """Series (and their visible labels) matching any selector (every readable series without one)
    and, with a ``window``, having a sample in it."""
    source = ScopedSeries(scope)
    if selectors:
        found: dict[int, tuple[Series, Labels]] = {}
        for text in selectors:
            for series, labels in source.series(selector_matchers(parse_selector(text))):
                found[series.pk] = (series, labels)
        chosen = list(found.values())
    else:
        rows = Series.objects.scoped(scope).select_related("org").order_by("pk")
        chosen = [(series, visible_labels(scope, series)) for series in rows]
    if window is not None:
        chosen = _with_samples(scope, chosen, window)
    source.note(series for series, _ in chosen)
    return chosen


def _with_samples(
    scope: Scope, chosen: list[tuple[Series, Labels]], window: tuple[int, int]
) -> list[tuple[Series, Labels]]:
    if not chosen:
        return chosen
    start, end = window
    hints = ReadHints(start=start, end=end + 1, clock=clock_for(scope))
    # Pruned by time in the store: a ten-year window touches the hour rollups and the partitions of
    # its two ends, not every partition of ten years for every series.
    sampled = get_store().series_with_samples(scope, [series.pk for series, _ in chosen], hints)
    return [(series, labels) for series, labels in chosen if series.pk in sampled]


def _fleet_figures(scope: Scope, selectors: list[str], window: Window = None) -> list[tuple[Series, Labels]]:
    """Series readable only inside fleet figures that a fleet aggregation over any selector (over
    every series without one) would read, each with the labels such a figure may keep: its metric
    name, owner and the labels the grant exposes. With a ``window``, only those with a sample in it."""
    source = ScopedSeries(scope)
    found: dict[int, tuple[Series, Labels]] = {}
    for groups in [selector_matchers(parse_selector(text)) for text in selectors] or [[[]]]:
        for series, labels in source.fleet_only(groups)[0]:
            usable = labels[FLEET_ONLY].split(",")
            found[series.pk] = (series, {name: labels[name] for name in usable if labels.get(name, "")})
    chosen = list(found.values())
    if window is not None and chosen:
        start, end = window
        hints = ReadHints(start=start, end=end + 1, step=end + 1 - start, clock=clock_for(scope), fleet=True)
        frame = get_store().select_buckets(scope, [series.pk for series, _ in chosen], hints)
        sampled = set(frame["series_id"][frame["count"] > 0].astype(np.int64).tolist())
        chosen = [(series, labels) for series, labels in chosen if series.pk in sampled]
    for series, _ in chosen:  # read at aggregate level, as selected
        note_read(scope, series.org_id, f"series {series.metric}", LEVEL_AGGREGATE)
    return chosen


def _shared(figures: list[tuple[Series, Labels]], key) -> list[Labels]:
    """The label sets ``key`` makes of ``figures`` (none for an empty one) that enough of them share for
    the fleet rule: those a fleet query grouped that way answers, each once."""
    counts: Counter = Counter()
    shown: dict[tuple, Labels] = {}
    for _, labels in figures:
        grouped = key(labels)
        if grouped:
            counts[label_key(grouped)] += 1
            shown[label_key(grouped)] = grouped
    return [grouped for found, grouped in shown.items() if fleet_group_allowed(counts[found])]


def _by(name: str):
    return lambda labels: {name: labels[name]} if labels.get(name, "") else {}


def series_labels(scope: Scope, selectors: list[str], window: Window = None) -> list[Labels]:
    """Label sets of the series readable alone, and of the fleet figures a query grouped by every
    label it may use answers."""
    unique = {label_key(labels): labels for _, labels in _readable(scope, selectors, window)}
    for labels in _shared(_fleet_figures(scope, selectors, window), dict):
        unique.setdefault(label_key(labels), labels)
    return [dict(sorted(unique[key].items())) for key in sorted(unique)]


def label_names(scope: Scope, selectors: list[str], window: Window = None) -> list[str]:
    """Names of the labels with a value a query may select or group by (``count by (<name>)`` answers
    some value)."""
    names = {
        name for _, labels in _readable(scope, selectors, window) for name, value in labels.items() if value
    }
    figures = _fleet_figures(scope, selectors, window)
    names |= {name for name in {n for _, labels in figures for n in labels} if _shared(figures, _by(name))}
    return sorted(names)


def label_values(scope: Scope, name: str, selectors: list[str], window: Window = None) -> list[str]:
    """Values of ``name`` as ``count by (<name>)`` over the selectors answers them."""
    values = {labels.get(name, "") for _, labels in _readable(scope, selectors, window)}
    values |= {labels[name] for labels in _shared(_fleet_figures(scope, selectors, window), _by(name))}
    values.discard("")
    return sorted(values)


def metadata(scope: Scope, metric: str | None, limit: int | None) -> dict[str, list[dict]]:
    """Per metric name its type (``counter``/``gauge``) and unit, as Prometheus's metadata API."""
    selectors = [f'{{{NAME}="{_quoted(metric)}"}}'] if metric else []
    out: dict[str, list[dict]] = {}
    for series, _labels in _readable(scope, selectors) + _fleet_figures(scope, selectors):
        entry = {"type": series.kind or "unknown", "help": "", "unit": series.unit or ""}
        if entry not in out.setdefault(series.metric, []):
            out[series.metric].append(entry)
    names = sorted(out)
    if limit is not None and limit > 0:
        names = names[:limit]
    return {name: out[name] for name in names}


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
