"""Which labels of a series shared at ``aggregate`` level name an entity (one machine, device or
process), and which a fleet figure over it may group by: the rule the gate (:mod:`orgs.access`)
applies to aggregate grants, as plain functions over label sets.

Invariants:

* label names are compared case-insensitively (``Hostname``, ``HOSTNAME`` and ``hostname`` are one
  name), and so are values when counting how many distinct values a label has;
* a known entity name (:data:`KNOWN_ENTITY_LABELS`) always names an entity, whatever a grant says,
  so an owner cannot share per-host series one by one by forgetting a name;
* a grant that names its entity labels adds them to the known ones; a grant that names none has them
  detected per metric within its selection (:func:`detected_entity_labels`);
* a label that names an entity is never usable in a fleet figure, even when a grant exposes it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

# Labels that name one machine, device or process in the exporters a cluster runs (node_exporter's
# ``nodename``, DCGM's ``Hostname``/``UUID``, Kubernetes' ``kubernetes_node``, federation's
# ``exported_instance``), compared case-insensitively.
KNOWN_ENTITY_LABELS = (
    "node",
    "nodename",
    "node_name",
    "kubernetes_node",
    "host",
    "hostname",
    "machine",
    "instance",
    "exported_instance",
    "gpu",
    "gpu_uuid",
    "uuid",
    "device_id",
    "pci_bus_id",
    "rank",
    "pod",
    "pod_name",
)
_KNOWN = frozenset(KNOWN_ENTITY_LABELS)
# Detection: a label names an entity when at least this share of the series carrying it have a value
# of their own (two series per value on average: a node's series for two mounts still count), and it
# has at least this many distinct values. One series alone tells nothing: it is a fleet figure.
UNIQUE_SHARE = 0.5
MIN_DISTINCT = 2


def fold(name: str) -> str:
    return name.casefold()


def is_known_entity_label(name: str) -> bool:
    """Whether ``name`` is one of :data:`KNOWN_ENTITY_LABELS`, in any case."""
    return fold(name) in _KNOWN


def detected_entity_labels(label_sets: Iterable[Mapping[str, str]]) -> frozenset[str]:
    """Label names (as stored) whose values are nearly unique per series among ``label_sets`` (the
    series of one metric a grant selects): at least :data:`MIN_DISTINCT` distinct values (compared
    case-insensitively), and as many as :data:`UNIQUE_SHARE` of the series carrying the label."""
    carrying: dict[str, int] = defaultdict(int)
    values: dict[str, set[str]] = defaultdict(set)
    for labels in label_sets:
        for name, value in labels.items():
            carrying[name] += 1
            values[name].add(fold(str(value)))
    return frozenset(
        name
        for name, count in carrying.items()
        if len(values[name]) >= MIN_DISTINCT and len(values[name]) >= UNIQUE_SHARE * count
    )


def entity_names(configured: Iterable[str], detected: Iterable[str]) -> frozenset[str]:
    """The case-folded entity label names of one grant's metric: the known ones, plus the grant's own
    list, or — when it names none — the detected ones."""
    configured = {fold(name) for name in configured}
    return frozenset(_KNOWN | (configured or {fold(name) for name in detected}))


def usable_names(
    labels: Mapping[str, str], entities: frozenset[str], exposed: Iterable[str]
) -> frozenset[str]:
    """The label names (as stored) of a series a fleet figure over it may group by, match on and show:
    those the grant exposes (any case) that name no entity."""
    exposed = {fold(name) for name in exposed}
    return frozenset(name for name in labels if fold(name) in exposed and fold(name) not in entities)


_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
MAX_NAMES = 50


class LabelListError(ValueError):
    """A grant's entity or exposed label list is not acceptable: ``field`` says which, ``reason`` why."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


def clean_label_lists(
    *, level: str, entity_labels: Iterable[str], exposed_labels: Iterable[str]
) -> tuple[list[str], list[str]]:
    """A grant's ``entity_labels`` and ``exposed_labels`` as stored (stripped, without repeats), or
    :class:`LabelListError`: each must hold label names, only an ``aggregate`` grant takes them, and
    no exposed label may name an entity (a known name or one of ``entity_labels``, any case)."""
    cleaned = {}
    for field_name, names in (("entity_labels", entity_labels), ("exposed_labels", exposed_labels)):
        names = list(dict.fromkeys(str(name).strip() for name in names or () if str(name).strip()))
        if len(names) > MAX_NAMES:
            raise LabelListError(field_name, f"at most {MAX_NAMES} label names")
        for name in names:
            if not _LABEL_NAME.match(name):
                raise LabelListError(field_name, f"{name[:100]!r} is no label name ([A-Za-z_][A-Za-z0-9_]*)")
        if names and level != "aggregate":
            raise LabelListError(field_name, "only an aggregate grant takes entity and exposed labels")
        cleaned[field_name] = names
    entities = entity_names(cleaned["entity_labels"], ())
    for name in cleaned["exposed_labels"]:
        if fold(name) in entities:
            raise LabelListError(
                "exposed_labels", f"{name!r} names an entity, which an aggregate grant never shows one by one"
            )
    return cleaned["entity_labels"], cleaned["exposed_labels"]
