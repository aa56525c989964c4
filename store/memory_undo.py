"""Undoing the in-memory store's changes whose transaction rolled back (:mod:`store.memory`).

A write or deletion notes each touched series' arrays before it (arrays are never changed in place, so
putting them back undoes it) and registers itself as an on-commit callback of the transaction it ran
in. Django forgets a callback when its transaction or savepoint rolls back: the store's next use undoes
every change whose callback was forgotten before it ran, newest first.
"""

from __future__ import annotations

import weakref

import numpy as np
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

Arrays = tuple[np.ndarray, np.ndarray]  # times (µs int64, ascending, unique) and values (float64)

_open_changes: weakref.WeakKeyDictionary[BaseDatabaseWrapper, list[Change]] = weakref.WeakKeyDictionary()


class Change:
    """What one write or deletion did to a database's samples: each touched series' arrays before it
    (arrays are never changed in place, so putting them back undoes it). Called by Django when the
    transaction commits."""

    def __init__(self, connection: BaseDatabaseWrapper, samples: dict[int, Arrays]):
        self.connection = connections[connection.alias]  # this thread's, not a proxy
        self.samples = samples
        self.before: dict[int, Arrays | None] = {}
        self.committed = False

    def keep(self, series_id: int) -> None:
        """Note ``series_id``'s arrays before the change; the first note inside a transaction
        registers the change with it."""
        if not self.before and self.connection.in_atomic_block:
            _open_changes.setdefault(self.connection, []).append(self)
            transaction.on_commit(self, using=self.connection.alias)
        self.before.setdefault(series_id, self.samples.get(series_id))

    def __call__(self) -> None:
        # captureOnCommitCallbacks(execute=True) runs callbacks still registered: not a commit
        if not self.registered():
            self.committed = True

    def registered(self) -> bool:
        return any(func is self for _sids, func, _robust in self.connection.run_on_commit)

    def undo(self) -> None:
        for series_id, arrays in self.before.items():
            if arrays is None:
                self.samples.pop(series_id, None)
            else:
                self.samples[series_id] = arrays


def undo_rolled_back(connection: BaseDatabaseWrapper) -> None:
    """Undo the changes made on ``connection`` (this thread's) whose transaction rolled back."""
    changes = _open_changes.get(connection, [])
    gone = [change for change in changes if not change.committed and not change.registered()]
    for change in reversed(gone):
        change.undo()
    _open_changes[connection] = [change for change in changes if not change.committed and change not in gone]


def forget_changes(connection: BaseDatabaseWrapper) -> None:
    """Drop what ``connection``'s open changes would undo (its samples are gone)."""
    _open_changes.pop(connection, None)
