"""Which way is worse for a metric, and how strongly a change went that way.

A latency that rose, an availability that fell, an error rate that climbed: for such **health
metrics** the direction of a change says whether it is a fault. Which metrics they are is data
(``metric_kinds.json`` beside this module; ``JOINTLINE_METRIC_KINDS_FILE`` replaces sections): name
globs (case-insensitive) and units, as a user's series arrive — a ``neutral`` name wins over the
others (``process_start_time_seconds`` is a moment, not a duration), then names, then units. A
metric none of them names has no polarity and is scored as before.

:func:`health_score` scores a change of a health metric by how improbable its move *in the worse
direction* is under the baseline (the tail probability and the share of the window that moved,
:mod:`analysis.scoring`), on the scale of every other score. It leaves out the bonus a steady shift
earns elsewhere: a faulty service's latency is erratic (some calls time out, others do not), so
steadiness rewarded the components that merely followed a slower neighbour over the one that failed
(docs/decisions/0050). A move the healthy way is still a change, counted at :data:`HEALTHY_SHARE`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from django.conf import settings

from analysis.scoring import KS_WEIGHT, STEADY_WEIGHT, SURPRISE_FULL, Change
from core import rulefiles

SHIPPED = Path(__file__).with_name("metric_kinds.json")
SECTIONS = ("neutral", "worse_when_lower", "worse_when_higher")
SIGNS = {"neutral": 0, "worse_when_lower": -1, "worse_when_higher": 1}
HEALTHY_SHARE = 0.5  # of its evidence, what a move the healthy way counts
# the most a health metric's evidence (tail probability + KS) can reach, and the score it maps onto:
# that of an equally improbable change with half the steady term (a fully moved, middling shift), so
# the two kinds of score stay comparable (docs/decisions/0050: 1.55 to 1.93 keeps both the reference
# scenario's dependency and the real-data figures; without the mapping a health metric could never
# outrank a steady shift of anything else)
FULL_EVIDENCE = 1.0 + KS_WEIGHT
FULL_SCORE = 1.0 + KS_WEIGHT + STEADY_WEIGHT / 2


class MetricKindsError(rulefiles.RulesFileError):
    pass


@dataclass(frozen=True)
class MetricKinds:
    """Per section (in the order they are tried): lower-case name globs and units."""

    sections: tuple[tuple[int, tuple[str, ...], frozenset[str]], ...]


def metric_kinds() -> MetricKinds:
    override = getattr(settings, "JOINTLINE_METRIC_KINDS_FILE", "") or ""
    return rulefiles.rules_in_force(SHIPPED, override, SECTIONS, build=_kinds_from, error=MetricKindsError)


def _kinds_from(document: dict, check: rulefiles.Fields) -> MetricKinds:
    sections = []
    for name in SECTIONS:
        item = check.object(document[name], name, ("names", "units"), ("names", "units"))
        names = check.names(item["names"], f"{name}.names") if item["names"] else ()
        units = check.names(item["units"], f"{name}.units") if item["units"] else ()
        sections.append((SIGNS[name], tuple(n.lower() for n in names), frozenset(u.lower() for u in units)))
    return MetricKinds(tuple(sections))


def metric_polarity(metric: str, unit: str = "") -> int:
    """+1 when a higher value is worse, -1 when a lower one is, 0 when the rules do not say."""
    name, unit = metric.lower(), unit.strip().lower()
    kinds = metric_kinds().sections
    for sign, names, _units in kinds:
        if any(fnmatchcase(name, glob) for glob in names):
            return sign
    for sign, _names, units in kinds:
        if unit and unit in units:
            return sign
    return 0


def health_score(change: Change, polarity: int) -> float:
    """The score of ``change`` for a metric of ``polarity`` (:func:`metric_polarity`): its usual
    score when the polarity is unknown or the change is one-sided (new, gone); else its evidence in
    the worse direction on the common scale, and :data:`HEALTHY_SHARE` of it for a move the healthy
    way (a level that held but whose tails moved counts as the worse way: tails are where faults show)."""
    if not polarity or change.novelty:
        return change.score
    evidence = min(1.0, change.surprise / SURPRISE_FULL) + KS_WEIGHT * change.ks
    scaled = evidence * FULL_SCORE / FULL_EVIDENCE + abs(change.saturation_change)
    return scaled if change.direction in (0, polarity) else HEALTHY_SHARE * scaled
