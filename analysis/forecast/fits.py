"""The scale forecast's models: a straight line and the Universal Scalability Law, fitted with intervals.

``load = background + k x nodes`` by least squares, standard errors from the residuals; the USL
``X(N) = l*N / (1 + s*(N-1) + k*N*(N-1))`` (plus the background) by Levenberg-Marquardt, with the
covariance of its coefficients. Intervals are 95 % (Student's t on the residual degrees of freedom).
Pure numpy: no database, no scope.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Student's t, two-sided 95 %, by degrees of freedom (1-30); past 30 the normal 1.96 is within 2 %.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(dof: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``dof`` degrees of freedom (at least 1)."""
    dof = max(int(dof), 1)
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


@dataclass(frozen=True)
class LinearFit:
    """``load = background + slope x nodes``: coefficients, their covariance, residual dof."""

    background: float
    slope: float
    cov: np.ndarray
    dof: int
    sizes: tuple[int, ...]  # distinct node counts observed (0 = background)
    widened: bool  # a single run size: the slope's variance is that of one observation per run

    @property
    def t(self) -> float:
        return t975(self.dof)

    @property
    def slope_se(self) -> float:
        return math.sqrt(max(self.cov[1, 1], 0.0))

    @property
    def background_se(self) -> float:
        return math.sqrt(max(self.cov[0, 0], 0.0))

    def predict(self, nodes: float) -> tuple[float, float]:
        """(demand, half-width of its 95 % interval) at ``nodes``."""
        x = np.array([1.0, float(nodes)])
        return float(self.background + self.slope * nodes), self.t * math.sqrt(
            max(float(x @ self.cov @ x), 0.0)
        )

    @property
    def scales(self) -> bool:
        """Does the load grow with the node count beyond the slope's interval?"""
        return self.slope - self.t * self.slope_se > 0


def fit_linear(nodes: np.ndarray, load: np.ndarray, runs: np.ndarray | None = None) -> LinearFit | None:
    """Least squares of ``load`` on ``nodes`` with an intercept; None without two distinct sizes.

    ``runs`` (one id per point, optional) counts the runs behind each size: when every non-zero size was
    seen in one run only and there is a single such size, the slope's variance is multiplied by the
    number of points at that size — the run's buckets share one observation of the size effect."""
    nodes, load = np.asarray(nodes, dtype=float), np.asarray(load, dtype=float)
    sizes = tuple(sorted({int(n) for n in nodes}))
    if len(sizes) < 2 or len(nodes) < 3:
        return None
    design = np.column_stack([np.ones_like(nodes), nodes])
    coef, *_ = np.linalg.lstsq(design, load, rcond=None)
    residual = load - design @ coef
    dof = len(load) - 2
    variance = float(residual @ residual) / dof if dof > 0 else 0.0
    cov = variance * np.linalg.inv(design.T @ design)
    positive = [s for s in sizes if s > 0]
    widened = len(positive) == 1
    if widened:
        points = int((nodes == positive[0]).sum())
        cov = cov * points
        dof = min(dof, 1 + (len({int(r) for r in runs}) if runs is not None else 1))
    return LinearFit(float(coef[0]), float(coef[1]), cov, dof, sizes, widened)


def usl(nodes: np.ndarray, lam: float, sigma: float, kappa: float, background: float = 0.0) -> np.ndarray:
    """The Universal Scalability Law's throughput (plus a background) at ``nodes``."""
    n = np.asarray(nodes, dtype=float)
    return background + lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


@dataclass(frozen=True)
class UslFit:
    """USL coefficients (lambda, sigma, kappa, the background when fitted), covariance, residual dof."""

    lam: float
    sigma: float
    kappa: float
    background: float
    cov: np.ndarray  # over (lambda, sigma, kappa[, background])
    dof: int

    @property
    def t(self) -> float:
        return t975(self.dof)

    def se(self, index: int) -> float:
        return math.sqrt(max(float(self.cov[index, index]), 0.0))

    def params(self) -> np.ndarray:
        base = [self.lam, self.sigma, self.kappa]
        return np.array(base + ([self.background] if self.cov.shape[0] == 4 else []))

    def _jacobian(self, n: np.ndarray) -> np.ndarray:
        return _usl_jacobian(n, self.params())

    def predict(self, nodes: float) -> tuple[float, float]:
        """(demand, half-width of its 95 % interval by the delta method) at ``nodes``."""
        value = float(usl(np.array([nodes]), self.lam, self.sigma, self.kappa, self.background)[0])
        j = self._jacobian(np.array([float(nodes)]))[0]
        return value, self.t * math.sqrt(max(float(j @ self.cov @ j), 0.0))

    @property
    def peak_nodes(self) -> float | None:
        """Where the modelled throughput peaks, ``sqrt((1 - sigma) / kappa)``; None without coherency cost."""
        if self.kappa <= 0 or self.sigma >= 1:
            return None
        return math.sqrt((1 - self.sigma) / self.kappa)


def _usl_jacobian(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    lam, sigma, kappa = p[:3]
    d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
    cols = [n / d, -lam * n * (n - 1) / d**2, -lam * n * n * (n - 1) / d**2]
    if len(p) == 4:
        cols.append(np.ones_like(n))
    return np.column_stack(cols)


def fit_usl(nodes: np.ndarray, load: np.ndarray, *, background: bool | None = None) -> UslFit | None:
    """Levenberg-Marquardt fit of the USL to ``load`` at ``nodes``; None without three distinct
    non-zero sizes or when it does not converge. ``background`` (default: when points at 0 nodes
    exist) adds a constant term. sigma and kappa are kept at or above 0 (the law's domain)."""
    n, y = np.asarray(nodes, dtype=float), np.asarray(load, dtype=float)
    if background is None:
        background = bool((n == 0).any())
    if len({v for v in n if v > 0}) < 3:
        return None
    b0 = float(np.median(y[n == 0])) if background and (n == 0).any() else 0.0
    smallest = n[n > 0].min()
    lam0 = max(float(np.mean(y[n == smallest]) - b0) / smallest, 1e-9)
    p = np.array([lam0, 0.01, 1e-4] + ([b0] if background else []))
    scale = np.abs(p) + 1e-12

    def cost(q):
        r = y - usl(n, *q[:3], q[3] if background else 0.0)
        return float(r @ r), r

    current, residual = cost(p)
    damping = 1e-3
    for _ in range(500):
        jac = _usl_jacobian(n, p) * scale  # scaled: lambda and kappa differ by many orders of magnitude
        a = jac.T @ jac
        g = jac.T @ residual
        step = np.linalg.solve(a + damping * np.diag(np.diag(a) + 1e-12), g) * scale
        trial = p + step
        trial[1:3] = np.maximum(trial[1:3], 0.0)
        value, trial_residual = cost(trial)
        if value < current:
            converged = abs(current - value) <= 1e-12 * max(current, 1e-300)
            p, current, residual, damping = trial, value, trial_residual, max(damping / 3, 1e-12)
            if converged:
                break
        else:
            damping *= 4
            if damping > 1e12:
                break
    dof = len(y) - len(p)
    if dof < 1:
        return None
    jac = _usl_jacobian(n, p)
    try:
        cov = current / dof * np.linalg.inv(jac.T @ jac)
    except np.linalg.LinAlgError:
        return None
    return UslFit(float(p[0]), float(p[1]), float(p[2]), float(p[3]) if background else 0.0, cov, dof)


def crossing(predict, capacity: float, *, low: float = 0.0, high: float = 100_000.0) -> float | None:
    """The smallest node count in ``[low, high]`` at which ``predict(n)`` reaches ``capacity`` (scanned
    on a grid, refined by bisection); None if it never does."""
    grid = np.unique(np.concatenate([np.arange(low, 200, 0.25), np.geomspace(200, high, 400)]))
    values = np.array([predict(x) for x in grid])
    hit = np.nonzero(values >= capacity)[0]
    if not len(hit):
        return None
    if hit[0] == 0:
        return float(grid[0])
    a, b = float(grid[hit[0] - 1]), float(grid[hit[0]])
    for _ in range(40):
        mid = (a + b) / 2
        a, b = (a, mid) if predict(mid) >= capacity else (mid, b)
    return b
