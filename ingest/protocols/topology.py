"""An organisation's dependency topology, pushed as JSON: which entity depends on which.

One request replaces what one ``source`` of the organisation said before::

    {"source": "cmdb",                                required, 1-200 chars
     "signal": "storage",                             lane family the edges are granted under (default other)
     "entities": [{"kind": "storage_service", "name": "datasets",
                   "series": ["storage_metadata_*", "storage_read_*"]}],   this org's metrics about it
     "edges": [{"from": "node/node-01", "to": "storage_service/datasets"}]}

An edge says that ``from`` depends on ``to`` (a node on the filesystem it mounts, a service on the
service it calls). An entity is written ``kind/name``: ``kind`` is lower-case letters, digits and
``_`` (``node``, ``switch``, ``service``), ``name`` any text without control characters. An entity
listed under ``entities`` may name, as metric-name globs (``*`` and ``?``), the organisation's own
series that describe it (a storage array's totals describe its service, not any one node); series
with an entity label (``node``, ``switch``…) are tied to their entity without being listed.

Unknown fields are refused, so a misspelt ``"edegs"`` does not silently push an empty topology.
Pure: bytes in, a :class:`TopologyDocument` or an :class:`~ingest.protocols.errors.InvalidPayload`
naming every field that is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from core.records import SIGNALS
from ingest.protocols.errors import FieldError, InvalidPayload

MAX_EDGES = 50_000
MAX_ENTITIES = 10_000
MAX_PATTERNS = 32
MAX_NAME_CHARS = 200
MAX_SOURCE_CHARS = 200
MAX_REPORTED = 100
_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_GLOB = re.compile(r"[a-zA-Z0-9_:*?]{1,200}")


@dataclass(frozen=True)
class EntityRef:
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class EntityBinding:
    """An entity and the metric-name globs of the pushing organisation's series that describe it."""

    entity: EntityRef
    series: tuple[str, ...]


@dataclass(frozen=True)
class TopologyDocument:
    source: str
    signal: str
    entities: tuple[EntityBinding, ...]
    edges: tuple[tuple[EntityRef, EntityRef], ...]  # (dependent, dependency)


class _EntityIn(msgspec.Struct, forbid_unknown_fields=True):
    kind: str
    name: str
    series: list[str] | None = None


class _EdgeIn(msgspec.Struct, forbid_unknown_fields=True, rename={"dependent": "from", "dependency": "to"}):
    dependent: str
    dependency: str


class _TopologyIn(msgspec.Struct, forbid_unknown_fields=True):
    source: str
    signal: str | None = None
    entities: list[_EntityIn] | None = None
    edges: list[_EdgeIn] | None = None


_decoder = msgspec.json.Decoder(_TopologyIn)


def parse_entity(text: str) -> EntityRef | str:
    """``kind/name`` as an :class:`EntityRef`, or the reason it is not one."""
    kind, slash, name = text.partition("/")
    if not slash:
        return "is not kind/name (e.g. node/node-01)"
    return _entity(kind, name)


def _entity(kind: str, name: str) -> EntityRef | str:
    if not _KIND.fullmatch(kind):
        return f"kind {kind[:40]!r} is not lower-case letters, digits and _ (at most 64)"
    if not name or len(name) > MAX_NAME_CHARS:
        return f"name must have 1-{MAX_NAME_CHARS} characters"
    if _CONTROL.search(name):
        return "name holds a control character"
    return EntityRef(kind, name)


def parse_topology(body: bytes) -> TopologyDocument:
    """The topology in ``body``; :class:`InvalidPayload` naming each wrong field otherwise."""
    try:
        document = _decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise InvalidPayload("invalid topology", [FieldError("$", str(exc))]) from None
    except msgspec.DecodeError as exc:
        raise InvalidPayload("body is not JSON", [FieldError("$", str(exc))]) from None
    problems: list[FieldError] = []
    source = document.source.strip()
    if not source or len(source) > MAX_SOURCE_CHARS or _CONTROL.search(source):
        problems.append(
            FieldError("source", f"must be 1-{MAX_SOURCE_CHARS} characters, no control characters")
        )
    signal = document.signal or "other"
    if signal not in SIGNALS:
        problems.append(FieldError("signal", f"{signal[:40]!r} is not one of {', '.join(SIGNALS)}"))
    entities = _entities(document.entities or [], problems)
    edges = _edges(document.edges or [], problems)
    if problems:
        raise InvalidPayload("invalid topology", problems[:MAX_REPORTED], total_errors=len(problems))
    return TopologyDocument(source=source, signal=signal, entities=entities, edges=edges)


def _entities(found: list[_EntityIn], problems: list[FieldError]) -> tuple[EntityBinding, ...]:
    if len(found) > MAX_ENTITIES:
        problems.append(FieldError("entities", f"{len(found)} entities; at most {MAX_ENTITIES} in one push"))
        return ()
    out: dict[EntityRef, EntityBinding] = {}
    for index, item in enumerate(found):
        where = f"entities[{index}]"
        entity = _entity(item.kind, item.name)
        if isinstance(entity, str):
            problems.append(FieldError(where, entity))
            continue
        patterns = item.series or []
        if len(patterns) > MAX_PATTERNS:
            problems.append(FieldError(f"{where}.series", f"at most {MAX_PATTERNS} metric-name globs"))
            continue
        bad = [p for p in patterns if not _GLOB.fullmatch(p)]
        if bad:
            problems.append(
                FieldError(
                    f"{where}.series", f"{bad[0][:40]!r} is not a metric-name glob (letters, _, :, * and ?)"
                )
            )
            continue
        out[entity] = EntityBinding(entity, tuple(dict.fromkeys(patterns)))
    return tuple(out.values())


def _edges(found: list[_EdgeIn], problems: list[FieldError]) -> tuple[tuple[EntityRef, EntityRef], ...]:
    if len(found) > MAX_EDGES:
        problems.append(FieldError("edges", f"{len(found)} edges; at most {MAX_EDGES} in one push"))
        return ()
    out: dict[tuple[EntityRef, EntityRef], None] = {}
    for index, item in enumerate(found):
        ends = []
        for field, text in (("from", item.dependent), ("to", item.dependency)):
            entity = parse_entity(text)
            if isinstance(entity, str):
                problems.append(FieldError(f"edges[{index}].{field}", entity))
            else:
                ends.append(entity)
        if len(ends) == 2:
            if ends[0] == ends[1]:
                problems.append(FieldError(f"edges[{index}]", "an entity cannot depend on itself"))
            else:
                out[(ends[0], ends[1])] = None
    return tuple(out)
