"""What Grafana's label browser and metric picker ask: series, label names, label values, metadata.

Every answer is built from the series the scope may read one by one, with their labels as shown to
it (:func:`timeline.promql.selection.visible_labels`): a masked value appears only as the viewer's
pseudonym, and no series of an organisation that shares nothing is ever looked at. The series each
answer is built from are noted for the audit. ``start``/``end`` are accepted and do not narrow the
answer: it covers every readable series (as Prometheus does for series still in its head block).
"""

from __future__ import annotations

from orgs.access import Scope
from timeline.models import Series
from timeline.promql.engine import selector_matchers
from timeline.promql.parse import parse_selector
from timeline.promql.selection import ScopedSeries, visible_labels
from timeline.promql.values import NAME, Labels, label_key


def _readable(scope: Scope, selectors: list[str]) -> list[tuple[Series, Labels]]:
    """Series (and their visible labels) matching any selector; every readable series without one."""
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
    source.note(series for series, _ in chosen)
    return chosen


def series_labels(scope: Scope, selectors: list[str]) -> list[Labels]:
    unique = {label_key(labels): labels for _, labels in _readable(scope, selectors)}
    return [dict(sorted(unique[key].items())) for key in sorted(unique)]


def label_names(scope: Scope, selectors: list[str]) -> list[str]:
    names = {name for _, labels in _readable(scope, selectors) for name, value in labels.items() if value}
    return sorted(names)


def label_values(scope: Scope, name: str, selectors: list[str]) -> list[str]:
    values = {labels.get(name, "") for _, labels in _readable(scope, selectors)}
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
