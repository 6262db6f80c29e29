"""The trend of a quantity over an ordered predictor (a turn index, a disclosed risk level):
an ordinary least-squares slope with an interval from resampling whole clusters.

Points of one conversation are not independent (the same chatbot, persona and context), so
the interval resamples conversations, each bringing all its points along
(:class:`~carebench.stats.bootstrap.Resampler` with ``groups``). A slope is a ratio of
sums, so every resample is one weighted sum: ``w @ x``, ``w @ xy``... for all resamples at
once, no loop over B.

Two estimands:

- ``pooled``: the slope of one line through every point (``numpy.polyfit(x, y, 1)[0]``);
- ``within``: the slope within conversations (x and y centred on their conversation's mean
  first, the fixed-effects estimator), so a difference *between* conversations (a persona
  whose every reply is shorter) does not count as a trend.

A slope is undefined (NaN, left out of the percentiles) where the resampled x does not vary.
"""

from __future__ import annotations

import numpy as np

from carebench.stats._validation import StatsError
from carebench.stats.bootstrap import CLUSTER_SEED, DEFAULT_B, Resampler, percentile_interval

ESTIMANDS = ("pooled", "within")


def _centred(v: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    sums = np.bincount(inverse, weights=v)
    sizes = np.bincount(inverse)
    return v - (sums / sizes)[inverse]


def _points(x: object, y: object, groups: object, estimand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xs, ys = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    g = np.asarray(groups).ravel()
    if not (xs.size == ys.size == g.size):
        raise StatsError(f"x, y and groups must have one entry per point, got {xs.size}, {ys.size}, {g.size}")
    if xs.size and not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise StatsError("x and y must be finite")
    if estimand not in ESTIMANDS:
        raise StatsError(f"unknown slope estimand {estimand!r} (one of {', '.join(ESTIMANDS)})")
    _, inverse = np.unique(g, return_inverse=True)
    if estimand == "within" and xs.size:
        xs, ys = _centred(xs, inverse), _centred(ys, inverse)
    return xs, ys, inverse


def _slopes(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """OLS slopes of the weighted points, one per row of ``w`` (NaN where x does not vary)."""
    n, sx, sy = w.sum(axis=1), w @ x, w @ y
    sxx, sxy = w @ (x * x), w @ (x * y)
    den = n * sxx - sx * sx
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (n * sxy - sx * sy) / den
    # x constant in the resample: the denominator is zero up to rounding
    scale = np.maximum(n * sxx, 1.0)
    out[np.abs(den) <= 1e-12 * scale] = np.nan
    return out


def ols_slope(x: object, y: object, groups: object = None, estimand: str = "pooled") -> float:
    """The least-squares slope of y on x (NaN when x does not vary); ``within`` needs ``groups``."""
    xs = np.asarray(x, dtype=float).ravel()
    g = np.zeros(xs.size, dtype=int) if groups is None else groups
    if estimand == "within" and groups is None:
        raise StatsError("a within-cluster slope needs groups")
    px, py, _ = _points(x, y, g, estimand)
    if px.size == 0:
        return float("nan")
    return float(_slopes(np.ones((1, px.size)), px, py)[0])


def cluster_bootstrap_slope(
    x: object, y: object, groups: object, B: int = DEFAULT_B, seed: int = CLUSTER_SEED,
    alpha: float = 0.05, estimand: str = "pooled",
) -> tuple[float, float, float]:
    """``(slope, lo, hi)``: the slope on all points and its percentile interval over ``B``
    resamples of whole groups, drawn from ``default_rng(seed)`` as every cluster bootstrap
    of carebench draws them. NaN everywhere when there are no points or x never varies."""
    px, py, inverse = _points(x, y, groups, estimand)
    nan = float("nan")
    if px.size == 0:
        return nan, nan, nan
    point = float(_slopes(np.ones((1, px.size)), px, py)[0])
    if np.isnan(point):
        return nan, nan, nan
    rs = Resampler(px.size, B, seed, inverse)
    samples = np.concatenate([_slopes(w, px, py) for w in rs.weight_chunks()])
    if np.isnan(samples).all():
        return point, nan, nan
    lo, hi = percentile_interval(samples, alpha)
    return point, float(lo), float(hi)
