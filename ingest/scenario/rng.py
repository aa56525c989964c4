"""Keyed random streams, so that changing one part of a scenario does not reshuffle another.

Every stream is a ``Generator(PCG64(SeedSequence(seed, spawn_key=...)))`` whose
spawn key is derived from stable names (CRC-32, never Python's salted ``hash``).
Noise for a series is drawn in fixed blocks of grid steps, keyed by the block
number, so a value depends on its step alone and not on how the caller chunks time.
"""

from __future__ import annotations

import zlib

import numpy as np

BLOCK_STEPS = 256


def key_int(part: str | int) -> int:
    if isinstance(part, int):
        return part
    return zlib.crc32(part.encode())


def stream(seed: int, *keys: str | int) -> np.random.Generator:
    """An independent generator for ``keys`` (e.g. ``("plan", "gpu_failures")``)."""
    sequence = np.random.SeedSequence(seed, spawn_key=tuple(key_int(k) for k in keys))
    return np.random.Generator(np.random.PCG64(sequence))


class Noise:
    """Per-step noise matrices: ``normal(key, rows, k0, k1)`` is row-wise stable under any chunking."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._blocks: dict[tuple[str, str, int, int], np.ndarray] = {}

    def normal(self, key: str, rows: int, k0: int, k1: int) -> np.ndarray:
        return self._draw("normal", key, rows, k0, k1)

    def uniform(self, key: str, rows: int, k0: int, k1: int) -> np.ndarray:
        return self._draw("uniform", key, rows, k0, k1)

    def poisson(self, key: str, lam: np.ndarray, k0: int) -> np.ndarray:
        """Poisson counts with per-element means ``lam`` (rows x steps), by inverse transform."""
        u = self.uniform(key, lam.shape[0], k0, k0 + lam.shape[1])
        return poisson_from_uniform(u, lam)

    def forget_before(self, k: int) -> None:
        """Drop cached blocks that end before step ``k`` (the chunk walker moves forward)."""
        block = k // BLOCK_STEPS
        for cached in [c for c in self._blocks if c[3] < block]:
            del self._blocks[cached]

    def _draw(self, kind: str, key: str, rows: int, k0: int, k1: int) -> np.ndarray:
        if k1 <= k0:
            return np.zeros((rows, 0))
        first, last = k0 // BLOCK_STEPS, (k1 - 1) // BLOCK_STEPS
        parts = [self._block(kind, key, rows, b) for b in range(first, last + 1)]
        joined = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        offset = k0 - first * BLOCK_STEPS
        return joined[:, offset : offset + (k1 - k0)]

    def _block(self, kind: str, key: str, rows: int, block: int) -> np.ndarray:
        cache_key = (kind, key, rows, block)
        found = self._blocks.get(cache_key)
        if found is None:
            rng = stream(self.seed, "noise", kind, key, block)
            if kind == "normal":
                found = rng.standard_normal((rows, BLOCK_STEPS))
            else:
                found = rng.random((rows, BLOCK_STEPS))
            self._blocks[cache_key] = found
        return found


def poisson_from_uniform(u: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Inverse-transform Poisson sampling, exact for the small means the scenario uses."""
    lam = np.maximum(lam, 0.0)
    big = lam > 30
    counts = np.zeros(lam.shape)
    term = np.exp(-np.where(big, 0.0, lam))
    cumulative = term.copy()
    k = 0
    undecided = (u > cumulative) & ~big
    while undecided.any() and k < 200:
        k += 1
        counts[undecided] += 1
        term = term * lam / k
        cumulative = cumulative + term
        undecided &= u > cumulative
    if big.any():  # normal approximation for large means
        from_normal = np.round(lam + np.sqrt(lam) * _normal_from_uniform(u))
        counts[big] = np.maximum(from_normal[big], 0)
    return counts


def _normal_from_uniform(u: np.ndarray) -> np.ndarray:
    # Acklam-free approximation is enough here: the logistic quantile scaled to unit variance.
    clipped = np.clip(u, 1e-12, 1 - 1e-12)
    return np.log(clipped / (1 - clipped)) * (np.sqrt(3) / np.pi)
