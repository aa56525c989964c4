"""Each entry's one line with numbers: what moved, by how much, against what and on how many series;
values and durations written as the war room's lanes write them."""

from __future__ import annotations

import math
from functools import partial

from analysis.changes.entries import Entry
from analysis.changes.periods import DAY_US, HOUR_US, MINUTE_US, Grid
from analysis.scoring import Change


def format_duration(us: int) -> str:
    """A duration in its largest whole unit where it is one (``2 h``, ``90 min``, ``3 d``)."""
    for unit, name in ((7 * DAY_US, "w"), (DAY_US, "d"), (HOUR_US, "h"), (MINUTE_US, "min")):
        if us >= unit and us % unit == 0:
            return f"{us // unit} {name}"
    return f"{us / 1e6:g} s"


_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"))
_UNIT_SUFFIX = {"bytes": "B", "seconds": "s", "bytes_per_second": "B/s", "celsius": "°C", "watts": "W"}


def format_value(value: float, unit: str = "", *, rate: bool = False, binary: bool = False) -> str:
    """``value`` with three significant digits and an SI prefix, and a short unit where one is known;
    ``rate``: a counter's per-second rate ("/s" after the unit); ``binary``: bytes in binary prefixes
    (GiB), as the war room's lanes show a NIC's counters."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    suffix = _UNIT_SUFFIX.get(unit, "")
    if rate and not suffix.endswith("/s"):
        suffix = f"{suffix}/s"
    magnitude = abs(value)
    if suffix == "s" and 0 < magnitude < 1:
        return f"{value * 1000:.3g} ms"
    prefixes = _BINARY if binary and suffix.startswith("B") else _SI
    for factor, prefix in prefixes:
        if magnitude >= factor:
            return f"{value / factor:.3g} {prefix}{suffix}".rstrip()
    return f"{value:.3g} {suffix}".rstrip()


def _formatter(entry: Entry):
    """How an entry's numbers are written: per second for a counter, binary bytes on the network (the
    lanes' convention, ``format.js`` ``binaryLane``)."""
    return partial(format_value, unit=entry.unit, rate=entry.rate, binary=entry.signal == "network")


def _percent(fraction: float) -> str:
    return f"{round(fraction * 100):.0f} %"


def explain(entry: Entry, grids: tuple[Grid, Grid]) -> str:
    """One line with numbers: what moved, by how much, against what, and on how many series."""
    c = entry.change
    fmt = _formatter(entry)
    fleet = entry.kind in ("fleet", "group") and entry.changed > 1
    median = "fleet median" if fleet else "median"
    if entry.kind in ("events", "template"):
        hours = [g.period.length / HOUR_US for g in grids]
        before, during = (float(p.sum()) / h for p, h in zip(entry.profile, hours, strict=True))
        what = "new template" if entry.kind == "template" and before == 0 else entry.kind
        text = f"{during:.3g} per hour vs {before:.3g} before"
        if what == "new template":
            text = f"new in the window: {text}"
        templates = [e["template"] for e in entry.examples if "template" in e]
        if templates:
            text += f"; mostly {templates[0]!r}"
        return text
    if c.novelty == "new":
        text = f"new in the window: {median} {fmt(c.during.median)}"
    elif c.novelty == "gone":
        text = f"no data in the window: {median} {fmt(c.before.median)} before"
    elif abs(c.saturation_change) >= 0.2:
        where = "fleet median " if fleet else ""
        text = (
            f"{where}at ≥ 95 % of {entry.capacity} {_percent(c.saturation_during)} of the window vs "
            f"{_percent(c.saturation_before)} before (median {fmt(c.during.median)} vs "
            f"{fmt(c.before.median)})"
        )
    else:
        text = (
            f"{median} {fmt(c.during.median)} vs "
            f"{fmt(c.before.median)} before{_relative(c)}, p95 "
            f"{fmt(c.during.p95)} vs {fmt(c.before.p95)}"
        )
    if entry.members > 1:
        text += f", on {entry.changed} of {entry.members} {entry.noun}"
    if c.room and not c.novelty:
        text += f"; data in only {c.before.n} of the baseline's {c.room} buckets"
    return text


def _relative(change: Change) -> str:
    before, during = change.before.median, change.during.median
    if before == 0:
        return ""
    ratio = during / before
    if ratio >= 2 or ratio <= 0.5:
        return f" (x{ratio:.3g})"
    return f" ({(ratio - 1) * 100:+.0f} %)"
