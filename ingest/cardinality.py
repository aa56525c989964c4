"""Series cardinality per organisation: how many series one organisation may hold
(``JOINTLINE_MAX_SERIES_PER_ORG``) and how many new ones one push may create
(``JOINTLINE_MAX_NEW_SERIES_PER_PUSH``).

Every series an organisation holds costs every reader: its catalogue, What changed and the
placeholders other organisations see scan its series. So the limits are checked twice:

* at push time (:func:`check_push`), synchronously, against the series already stored: a push whose
  new series exceed either limit is refused whole, a 400 naming ``series`` and the limit, and nothing
  is journaled. Pushes accepted but not applied yet are not counted, and a push far from the limit
  is passed on a count up to 10 s old, so several at once may pass;
* at apply time (:func:`limit_batches`), the authority: in the apply transaction, under a lock per
  organisation near its limit (PostgreSQL), series beyond the organisation's limit are left out of
  the write, and what was left out is counted on the journal entry (``series_dropped``,
  ``samples_dropped``, shown by the batch status) and in the workers' metrics, never silently.
  Samples of series already stored are never dropped: an organisation at its limit keeps writing to
  the series it has.

A series is new when its (metric, labels) is not stored for the organisation yet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from redis.exceptions import RedisError

from core.records import Batch
from ingest.protocols.errors import FieldError, InvalidPayload
from orgs.models import Organization
from store.base import labels_key
from timeline.models import Series

COUNT_CACHE_S = 10
CARDINALITY_LOCK = 0x4A4C4344  # "JLCD", with the organisation's id: one apply creating its series at a time

SeriesKey = tuple[str, str]  # (metric, canonical labels)
CACHE_ERRORS = (RedisError, OSError)


def series_keys(batch: Batch) -> list[SeriesKey]:
    """The distinct series of ``batch`` in the order they first appear."""
    return list(dict.fromkeys((block.metric, labels_key(block.labels)) for block in batch.series))


# The write path counts an organisation's own series for its limits (as the store's writer resolves
# them): no reader and no other organisation is involved, so no Scope either.
def stored_series_count(org_id: int, *, recent: bool = False) -> int:
    """How many series the organisation holds; with ``recent``, as counted up to
    :data:`COUNT_CACHE_S` seconds ago (a push's first look: counting 100,000 series takes ~50 ms)."""
    # The database's name too: installations (and test runs) sharing one Redis number their orgs alike.
    key = f"jl:series-count:{connection.settings_dict['NAME']}:{org_id}"
    if recent:
        with contextlib.suppress(*CACHE_ERRORS):  # an unreachable cache: count in the database
            counted = cache.get(key)
            if counted is not None:
                return counted
    counted = Series.unscoped.filter(org_id=org_id).count()  # noqa: TID251
    with contextlib.suppress(*CACHE_ERRORS):  # pushes go on while Redis is down (README, "nothing lost")
        cache.set(key, counted, COUNT_CACHE_S)
    return counted


def new_series(org_id: int, keys: Iterable[SeriesKey]) -> list[SeriesKey]:
    """The keys of ``keys`` (in their order) not stored for the organisation yet."""
    keys = list(keys)
    stored: set[SeriesKey] = set()
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        rows = Series.unscoped.filter(  # noqa: TID251
            org_id=org_id,
            metric__in=sorted({metric for metric, _ in chunk}),
            labels_key__in=sorted({key for _, key in chunk}),
        ).values_list("metric", "labels_key")
        stored.update(rows)
    return [key for key in keys if key not in stored]


def check_push(org: Organization, batch: Batch) -> None:
    """Raise :class:`InvalidPayload` (400, field ``series``) when ``batch`` would create more new
    series than one push may, or take ``org`` over the series it may hold. A push whose distinct
    series fit both limits even if all were new is passed after one count."""
    check_new_series(org, series_keys(batch))


def check_new_series(org: Organization, keys: list[SeriesKey]) -> None:
    """:func:`check_push` for the distinct series ``keys`` of one push (or one imported file)."""
    if not keys:
        return
    per_push = settings.JOINTLINE_MAX_NEW_SERIES_PER_PUSH
    per_org = settings.JOINTLINE_MAX_SERIES_PER_ORG
    if len(keys) <= per_push and stored_series_count(org.pk, recent=True) + len(keys) <= per_org:
        return
    new = new_series(org.pk, keys)
    if not new:
        return
    if len(new) > per_push:
        raise InvalidPayload(
            "push refused: too many new series",
            [
                FieldError(
                    "series",
                    f"{len(new)} new series in one push; at most {per_push} may be created per push "
                    "(JOINTLINE_MAX_NEW_SERIES_PER_PUSH): send them in several pushes",
                )
            ],
        )
    stored = stored_series_count(org.pk)
    if stored + len(new) > per_org:
        raise InvalidPayload(
            "push refused: over the organisation's series limit",
            [
                FieldError(
                    "series",
                    f"{org.slug} holds {stored} series and may hold at most {per_org} "
                    f"(JOINTLINE_MAX_SERIES_PER_ORG); this push would add {len(new)} new ones",
                )
            ],
        )


@dataclass(frozen=True)
class Limited:
    """A batch as the apply may write it, and what the organisation's series limit left out."""

    batch: Batch
    series_dropped: int = 0
    samples_dropped: int = 0


def limit_batches(entries: list[tuple[int, Batch]]) -> list[Limited]:
    """Each (org id, batch) of one apply transaction without the new series beyond its organisation's
    limit (the first new series, in the order of the entries, fill the room left). In the caller's
    transaction; on PostgreSQL an organisation near its limit is locked (in id order) until it ends,
    so two workers never both fill the same room. Applies of an organisation far from its limit take
    no lock: at the moment it comes near, the applies already running may each still add their new
    series (at most one push's worth, JOINTLINE_MAX_NEW_SERIES_PER_PUSH, per apply worker)."""
    limit = settings.JOINTLINE_MAX_SERIES_PER_ORG
    keys = [series_keys(batch) for _, batch in entries]
    wanted: dict[int, int] = {}
    for (org_id, _), found in zip(entries, keys, strict=True):
        if found:
            wanted[org_id] = wanted.get(org_id, 0) + len(found)
    # An organisation far from its limit (all its series here new, and still within it) needs neither
    # the look-up of which are new nor the lock: the apply of every ordinary push stays as it was.
    near = {org_id for org_id, count in wanted.items() if stored_series_count(org_id) + count > limit}
    if not near:
        return [Limited(batch) for _, batch in entries]
    fresh = {
        index: new_series(org_id, keys[index]) if org_id in near else []
        for index, (org_id, _) in enumerate(entries)
    }
    orgs = sorted({entries[index][0] for index, found in fresh.items() if found})
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for org_id in orgs:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [CARDINALITY_LOCK, org_id])
    room = {org_id: limit - stored_series_count(org_id) for org_id in orgs}
    admitted: dict[int, set[SeriesKey]] = {org_id: set() for org_id in orgs}
    out: list[Limited] = []
    for index, (org_id, batch) in enumerate(entries):
        refused: set[SeriesKey] = set()
        for key in fresh[index]:
            if key in admitted[org_id]:
                continue
            if room[org_id] > 0:
                admitted[org_id].add(key)
                room[org_id] -= 1
            else:
                refused.add(key)
        out.append(_without(batch, refused))
    return out


def _without(batch: Batch, refused: set[SeriesKey]) -> Limited:
    if not refused:
        return Limited(batch)
    kept, dropped_samples = [], 0
    for block in batch.series:
        if (block.metric, labels_key(block.labels)) in refused:
            dropped_samples += len(block.ts)
        else:
            kept.append(block)
    return Limited(msgspec.structs.replace(batch, series=kept), len(refused), dropped_samples)
