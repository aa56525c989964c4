"""What Grafana's label browser and metric picker ask: series, label names, label values, metadata.

Every answer is built from the series the scope may read one by one, with their labels as shown to
it (:func:`timeline.promql.selection.visible_labels`): a masked value appears only as the viewer's
pseudonym, and no series of an organisation that shares nothing is ever looked at. The series each
answer is built from are noted for the audit. With a ``window`` (``start``/``end``), only the series
with a sample in it (both ends included, in corrected time, cut by the grant's time window) count; the
store counts them in one bucket per series (:meth:`~timeline.store.base.StoreBackend.select_buckets`).
Without one, every readable series.
"""

from __future__ import annotations

import numpy as np

from orgs.access import Scope
from timeline.clock.model import clock_for
from timeline.models import Series
from timeline.promql.engine import selector_matchers
from timeline.promql.parse import parse_selector
from timeline.promql.selection import ScopedSeries, visible_labels
from timeline.promql.values import NAME, Labels, label_key
from timeline.store import ReadHints, get_store

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
    hints = ReadHints(start=start, end=end + 1, step=end + 1 - start, clock=clock_for(scope))
    frame = get_store().select_buckets(scope, [series.pk for series, _ in chosen], hints)
    sampled = set(frame["series_id"][frame["count"] > 0].astype(np.int64).tolist())
    return [(series, labels) for series, labels in chosen if series.pk in sampled]


def series_labels(scope: Scope, selectors: list[str], window: Window = None) -> list[Labels]:
    unique = {label_key(labels): labels for _, labels in _readable(scope, selectors, window)}
    return [dict(sorted(unique[key].items())) for key in sorted(unique)]


def label_names(scope: Scope, selectors: list[str], window: Window = None) -> list[str]:
    readable = _readable(scope, selectors, window)
    names = {name for _, labels in readable for name, value in labels.items() if value}
    return sorted(names)


def label_values(scope: Scope, name: str, selectors: list[str], window: Window = None) -> list[str]:
    values = {labels.get(name, "") for _, labels in _readable(scope, selectors, window)}
    values.discard("")
    return sorted(values)


def metadata(scope: Scope, metric: str | None, limit: int | None) -> dict[str, list[dict]]:
    """Per metric name its type (``counter``/``gauge``) and unit, as Prometheus's metadata API."""
    selectors = [f'{{{NAME}="{_quoted(metric)}"}}'] if metric else []
    out: dict[str, list[dict]] = {}
    for series, _labels in _readable(scope, selectors):
        entry = {"type": series.kind or "unknown", "help": "", "unit": series.unit or ""}
        if entry not in out.setdefault(series.metric, []):
            out[series.metric].append(entry)
    names = sorted(out)
    if limit is not None and limit > 0:
        names = names[:limit]
    return {name: out[name] for name in names}


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
