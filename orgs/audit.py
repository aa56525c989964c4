"""The audit trail of reads of another organisation's data: one entry per owner, level and view
sitting, so an owner sees who read what of theirs without one row per refresh.

What one request (or job) presented is first noted in its :class:`AuditLog` (kept by the request's
read context, :mod:`orgs.read_context`), then recorded here as entries."""

from __future__ import annotations

import re
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from orgs.models import AuditEntry

# Reads of one view less than this apart are one audit entry; a longer pause starts a new one, so an
# entry's first and last seen bracket one sitting, not a week.
AUDIT_COALESCE_GAP = timedelta(minutes=30)
_AUDIT_ITEM = re.compile(r"(\d+) x ([^,]+)")


Read = tuple[int, str, str]  # (owner organisation id, what was shown, level)


class AuditLog:
    """What one read context presented of other organisations, in the order it was noted. Only ever
    appended to (by the threads of the read pool too); :meth:`record` writes the reads noted since its
    previous call as entries, so a request that records part of its reads under another name (an
    export) does not record them twice."""

    def __init__(self) -> None:
        self._reads: list[Read] = []
        self._recorded = 0
        self._lock = threading.Lock()

    def note(self, owner_id: int, what: str, level: str) -> None:
        with self._lock:
            self._reads.append((owner_id, what, level))

    def replay(self, reads: Iterable[Read]) -> None:
        """Note ``reads`` again (those a cached answer noted while it was computed)."""
        reads = list(reads)
        with self._lock:
            self._reads.extend(reads)

    def entries(self) -> tuple[Read, ...]:
        """Every read noted so far, recorded or not."""
        with self._lock:
            return tuple(self._reads)

    def record(
        self,
        *,
        viewer_org_id: int | None,
        viewer: str,
        via: str,
        through: str = "",
        window: tuple[int, int] | None = None,
    ) -> int:
        """Record the reads noted since the previous call (:func:`audit_reads_record`); how many
        entries were written or extended."""
        with self._lock:
            reads = self._reads[self._recorded :]
            self._recorded = len(self._reads)
        return audit_reads_record(
            reads=reads, viewer_org_id=viewer_org_id, viewer=viewer, via=via, through=through, window=window
        )


def audit_what_merged(first: str, second: str) -> str:
    """What two reads of one view showed together: every item of either ("2 x series nfs_rpc_slots"),
    each with the most one read showed of it. (One read notes an item once per lane that shows it,
    and a cached answer notes it once: a count summed over reads would say nothing.)"""
    items: dict[str, int] = {}
    for text in (first, second):
        for n, what in _AUDIT_ITEM.findall(text):
            items[what.strip()] = max(items.get(what.strip(), 0), int(n))
    return ", ".join(f"{n} x {what}" for what, n in sorted(items.items()))[:500]


def audit_via_merged(through: str, first: str, second: str) -> str:
    """The ``via`` of two reads of one view: the view, then every endpoint either went through."""
    if not through:
        return second
    endpoints: set[str] = set()
    for via in (first, second):
        inside = via[len(through) :].strip()
        if inside.startswith("(") and inside.endswith(")"):
            endpoints.update(part.strip() for part in inside[1:-1].split(",") if part.strip())
    return f"{through} ({', '.join(sorted(endpoints))})"[:500] if endpoints else through


def _audit_extend(entry: AuditEntry, *, now: datetime) -> bool:
    """Count ``entry``'s read on the latest entry of the same view, if it is recent enough; whether it
    did. The entry is locked while it changes, so concurrent reads of one view add up."""
    with transaction.atomic(savepoint=False):
        view = {"through": entry.through} if entry.through else {"through": "", "via": entry.via}
        latest = (
            AuditEntry.objects.select_for_update()
            .filter(
                owner_id=entry.owner_id,
                viewer=entry.viewer,
                viewer_org_id=entry.viewer_org_id,
                level=entry.level,
                last_at__gte=now - AUDIT_COALESCE_GAP,
                **view,
            )
            .order_by("-last_at", "-pk")
            .first()
        )
        if latest is None:
            return False
        latest.count += 1
        latest.last_at = max(latest.last_at, now)
        latest.what = audit_what_merged(latest.what, entry.what)
        latest.via = audit_via_merged(entry.through, latest.via, entry.via)
        for name, pick in (("window_start", min), ("window_end", max)):
            value = getattr(entry, name)
            if value is not None:
                current = getattr(latest, name)
                setattr(latest, name, value if current is None else pick(current, value))
        latest.save(update_fields=["count", "last_at", "what", "via", "window_start", "window_end"])
        return True


def audit_reads_record(
    *,
    reads: list[Read],
    viewer_org_id: int | None,
    viewer: str,
    via: str,
    through: str = "",
    window: tuple[int, int] | None = None,
) -> int:
    """Record ``reads`` (owner id, what, level) as entries, one per owner and level, each counted on
    the latest entry of the same view when recent enough (see
    :meth:`orgs.read_context.ReadContext.flush_audit`); returns how many entries were written or
    extended."""
    if not reads:
        return 0
    grouped: dict[tuple[int, str], Counter] = defaultdict(Counter)
    for owner_id, what, level in reads:
        grouped[(owner_id, level)][what] += 1
    now = timezone.now()
    written = 0
    # One transaction for every owner's entry (one commit a request, not one per owner); the entries
    # are locked in the order of (owner, level), the same for every request, so two never deadlock.
    with transaction.atomic():
        for (owner_id, level), whats in sorted(grouped.items()):
            entry = AuditEntry(
                owner_id=owner_id,
                viewer_org_id=viewer_org_id,
                viewer=viewer,
                level=level,
                what=", ".join(f"{n} x {what}" for what, n in sorted(whats.items()))[:500],
                window_start=window[0] if window else None,
                window_end=window[1] if window else None,
                via=via[:500],
                through=through[:120],
                last_at=now,
            )
            if not _audit_extend(entry, now=now):
                entry.save()
            written += 1
    return written
