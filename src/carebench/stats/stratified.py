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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from carebench.stats._validation import StatsError, check_alpha, check_B, check_k, label_pair
from carebench.stats.bootstrap import percentile_interval
from carebench.stats.metrics import CM_METRICS, resolve_names

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
    num = np.zeros((B, xa.shape[1]))
    den = np.zeros((B, xa.shape[1]))
    for idx, counts in cell_counts(cell_arr, B, seed):
        num += counts @ xw[idx]
        den += counts @ mw[idx]
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = (num / den).T  # (m, B)
    lo, hi = percentile_interval(samples, alpha)
    return WeightedEstimate(weighted_mean(xa, wa), lo, hi, samples, xa.shape[0], B, int(seed))


def cell_counts(cells: object, B: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Per cell (sorted labels), its row indices and the ``(B, n_cell)`` resample counts of
    its rows: the within-cell draws of the module docstring, shared by every within-cell
    bootstrap so they all see the same resamples for the same cells and seed."""
    cell_arr = np.asarray(cells, dtype=object).astype(str)
    rng = np.random.default_rng(seed)
    for lab in np.unique(cell_arr):
        idx = np.flatnonzero(cell_arr == lab)
        k = idx.size
        draws = rng.integers(0, k, size=(B, k))
        counts = np.zeros((B, k))
        np.add.at(counts, (np.repeat(np.arange(B), k), draws.ravel()), 1.0)
        yield idx, counts


def cell_multiplicities(cells: object, B: int, seed: int) -> np.ndarray:
    """``(B, n)`` multiplicity of every row in each within-cell resample (same draws as
    :func:`cell_counts`): every resample keeps each cell's sample size."""
    cell_arr = np.asarray(cells, dtype=object).astype(str)
    if cell_arr.ndim != 1 or cell_arr.size == 0:
        raise StatsError("cells must be a non-empty one-dimensional array")
    out = np.zeros((check_B(B), cell_arr.size))
    for idx, counts in cell_counts(cell_arr, B, seed):
        out[:, idx] = counts
    return out


def weighted_metric_bootstrap(
    y_true: object,
    y_pred: object,
    k: int,
    weights: object,
    cells: object,
    names: Iterable[str] | str | None = None,
    B: int = 2000,
    seed: int = CELL_SEED,
    alpha: float = 0.05,
) -> dict[str, dict]:
    """Horvitz-Thompson weighted confusion-matrix metrics with a within-cell bootstrap.

    The weighted confusion matrix holds, per cell (truth, prediction), the sum of the
    weights (1 / inclusion probability) of its items: an estimate of the population's
    counts. Every metric of :data:`carebench.stats.metrics.CM_METRICS` is a function of
    that matrix, so the weighted metric is the same function of the weighted matrix;
    with all weights 1 it is the unweighted metric. Resampling is within ``cells``
    (the sampling strata), which keeps each stratum's sample size, as the design did.
    """
    check_alpha(alpha)
    names = resolve_names(names)
    k = check_k(k)
    t, p = label_pair(y_true, y_pred, k)
    _, wa = _check(t.astype(float), weights)
    E = np.zeros((t.size, k * k))
    E[np.arange(t.size), t * k + p] = 1.0
    full = (wa @ E).reshape(k, k)
    if np.asarray(cells).shape != (t.size,):
        raise StatsError(f"cells must have one entry per item ({t.size})")
    M = cell_multiplicities(cells, B, seed)
    cms = ((M * wa[None, :]) @ E).reshape(-1, k, k)
    out: dict[str, dict] = {}
    for name in names:
        lo, hi = percentile_interval(CM_METRICS[name](cms), alpha)
        out[name] = {"value": float(CM_METRICS[name](full)), "ci": (float(lo), float(hi))}
    return out


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
