"""Cumulative counters of a scenario's series, carried from one chunk to the next.

A counter holds whole bytes (or errors, or retransmits) per row and restarts from zero when its node
is scraped again after a reboot, as a real exporter's counters do.
"""

from __future__ import annotations

import numpy as np

from ingest.scenario import activity as act


class Counter:
    """Cumulative values per row; a reset restarts the row from what it counted since boot."""

    def __init__(self, initial: np.ndarray) -> None:
        self.value = np.asarray(initial, dtype=np.float64).copy()

    def advance(self, increments: np.ndarray, reset: np.ndarray) -> np.ndarray:
        out = self.value[:, None] + np.cumsum(increments, axis=1)
        for row in np.flatnonzero(reset.any(axis=1)):
            base = self.value[row]
            for position in range(increments.shape[1]):
                base = increments[row, position] if reset[row, position] else base + increments[row, position]
                out[row, position] = base
        if out.shape[1]:
            self.value = out[:, -1].copy()
        return out


def counter_resets(at: np.ndarray, first: int, last: int, stride: int) -> np.ndarray:
    """True where a node is scraped again after being down: its counters restart there."""
    columns = np.arange(first - 1, last) * stride
    codes = at[:, np.maximum(columns, 0)]
    if first == 0:
        codes[:, 0] = act.IDLE
    return (codes[:, 1:] != act.DOWN) & (codes[:, :-1] == act.DOWN)
