"""Inverse-probability-weighted estimates with a bootstrap that resamples within cells.

A review sample drawn with equal counts per design cell (e.g. context x rewriter)
over-represents small cells; each item then carries the weight
``N_cell / n_cell`` (population size over sample size of its cell), and a
population estimate is the weighted mean. Its uncertainty comes from resampling
items with replacement *inside* each cell, so every resample keeps the design's
cell sizes (VEILED-SH, Appendix A.5: 2,000 resamples within context-rewriter cells,
2.5th and 97.5th percentiles).

Draw order (so a plain loop can reproduce it): cells in sorted order of their
labels; for each cell one ``rng.integers(0, n_cell, size=(B, n_cell))`` from a
single ``default_rng(seed)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from carebench.stats._validation import StatsError, check_alpha, check_B
from carebench.stats.bootstrap import percentile_interval

#: VEILED-SH reports its review intervals from 2,000 resamples; its bootstraps use seed 12345.
CELL_SEED = 12345


@dataclass(frozen=True)
class WeightedEstimate:
    """A weighted mean per column with its percentile interval and the resamples."""

    estimate: np.ndarray  # (m,)
    lo: np.ndarray
    hi: np.ndarray
    samples: np.ndarray  # (m, B)
    n: int
    B: int
    seed: int


def ipw_weights(cells: object, population: dict[object, int]) -> np.ndarray:
    """Weight ``N_c / n_c`` for every sampled item of cell ``c``.

    ``population[c]`` is the number of population items in cell ``c``; a sampled
    cell missing from it, or with fewer population items than sampled, is an error.
    """
    cell_arr = np.asarray(cells, dtype=object)
    labels, inverse, counts = np.unique(cell_arr.astype(str), return_inverse=True, return_counts=True)
    by_str = {str(k): v for k, v in population.items()}
    w = np.empty(cell_arr.size, dtype=float)
    for j, lab in enumerate(labels):
        big_n = by_str.get(lab)
        if big_n is None or big_n < counts[j]:
            raise StatsError(f"cell {lab!r}: population size {big_n} is below its sample size {counts[j]}")
        w[inverse == j] = big_n / counts[j]
    return w


def weighted_mean(x: object, w: object) -> np.ndarray:
    """Column-wise weighted mean of ``x`` (n,) or (n, m), ignoring NaN entries."""
    xa, wa = _check(x, w)
    mask = ~np.isnan(xa)
    num = (np.where(mask, xa, 0.0) * wa[:, None]).sum(axis=0)
    den = (mask * wa[:, None]).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def weighted_cell_bootstrap(
    x: object,
    w: object,
    cells: object,
    B: int = 2000,
    seed: int = CELL_SEED,
    alpha: float = 0.05,
) -> WeightedEstimate:
    """Weighted means of the columns of ``x`` with a within-cell percentile bootstrap.

    ``x`` is (n,) or (n, m) (e.g. gate failures as 0/1 and ratings 1-5; NaN marks a
    missing value, left out of its column), ``w`` the item weights, ``cells`` the
    design cell of each item. Fully vectorized: per cell, the resample counts of
    its items form a (B, n_cell) matrix, and numerators and denominators for all
    resamples are matrix products.
    """
    xa, wa = _check(x, w)
    B = check_B(B)
    check_alpha(alpha)
    cell_arr = np.asarray(cells, dtype=object).astype(str)
    if cell_arr.shape != (xa.shape[0],):
        raise StatsError(f"cells must have one entry per item ({xa.shape[0]}), got shape {cell_arr.shape}")
    mask = ~np.isnan(xa)
    xw = np.where(mask, xa, 0.0) * wa[:, None]  # (n, m)
    mw = mask * wa[:, None]
    rng = np.random.default_rng(seed)
    num = np.zeros((B, xa.shape[1]))
    den = np.zeros((B, xa.shape[1]))
    for lab in np.unique(cell_arr):
        idx = np.flatnonzero(cell_arr == lab)
        k = idx.size
        draws = rng.integers(0, k, size=(B, k))
        counts = np.zeros((B, k))
        np.add.at(counts, (np.repeat(np.arange(B), k), draws.ravel()), 1.0)
        num += counts @ xw[idx]
        den += counts @ mw[idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = (num / den).T  # (m, B)
    lo, hi = percentile_interval(samples, alpha)
    return WeightedEstimate(weighted_mean(xa, wa), lo, hi, samples, xa.shape[0], B, int(seed))


def _check(x: object, w: object) -> tuple[np.ndarray, np.ndarray]:
    xa = np.asarray(x, dtype=float)
    if xa.ndim == 1:
        xa = xa[:, None]
    if xa.ndim != 2 or xa.shape[0] == 0:
        raise StatsError("x must be a non-empty (n,) or (n, m) array")
    wa = np.asarray(w, dtype=float)
    if wa.shape != (xa.shape[0],):
        raise StatsError(f"weights must have one entry per item ({xa.shape[0]}), got shape {wa.shape}")
    if np.any(wa < 0) or not np.all(np.isfinite(wa)):
        raise StatsError("weights must be finite and non-negative")
    return xa, wa
