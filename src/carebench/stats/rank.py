"""Rank stability of leaderboards: Spearman's rho and rank movement.

Used for replicate stability (three runs of the same evaluation) and
leave-one-judge-out comparisons (DistressBench, Appendices B.6 and B.8). A leaderboard is either
an array of scores aligned by position or a mapping ``system -> score``;
mappings are aligned by system name and must cover the same systems.

Ranks are computed with numpy rather than ``scipy.stats`` (whose import takes
0.6-0.9 s, a fifth of re-scoring a paper-size support run); the tests check
both functions against ``scipy.stats.rankdata`` and ``scipy.stats.spearmanr``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np

from carebench.stats._validation import StatsError

Leaderboard = Mapping[str, float] | Sequence[float] | np.ndarray


def _align(a: Leaderboard, b: Leaderboard) -> tuple[list[str] | None, np.ndarray, np.ndarray]:
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise StatsError("compare two mappings or two arrays, not one of each")
    if isinstance(a, Mapping):
        if set(a) != set(b):
            raise StatsError(
                f"leaderboards cover different systems: only in first {sorted(set(a) - set(b))}, "
                f"only in second {sorted(set(b) - set(a))}"
            )
        names = sorted(a)
        return names, np.array([a[n] for n in names], float), np.array([b[n] for n in names], float)
    x, y = np.asarray(a, float), np.asarray(b, float)
    if x.ndim != 1 or x.shape != y.shape:
        raise StatsError(f"leaderboards must be 1-D and equally long, got {x.shape} and {y.shape}")
    return None, x, y


def spearman_rho(a: Leaderboard, b: Leaderboard) -> float:
    """Spearman's rank correlation (ties get average ranks); needs >= 2 systems."""
    _, x, y = _align(a, b)
    if x.size < 2:
        raise StatsError("Spearman's rho needs at least two systems")
    if np.isnan(x).any() or np.isnan(y).any():
        return float("nan")  # as scipy.stats.spearmanr: a missing score has no rank
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")  # a constant leaderboard has no ranking to correlate
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float(np.clip(rx @ ry / np.sqrt((rx @ rx) * (ry @ ry)), -1.0, 1.0))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of their positions; all NaN when any
    value is NaN (``scipy.stats.rankdata(x, method="average")``)."""
    x = np.asarray(x, float)
    if np.isnan(x).any():
        return np.full(x.shape, np.nan)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # first position of each run of ties
    ends = np.r_[starts[1:], x.size]  # one past its last
    out = np.empty(x.size)
    out[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return out


def ranks(scores: Leaderboard, higher_is_better: bool = True) -> np.ndarray | dict[str, float]:
    """Rank 1 = best; ties share the average rank."""
    if isinstance(scores, Mapping):
        names = list(scores)
        r = ranks(np.array([scores[n] for n in names], float), higher_is_better)
        return dict(zip(names, (float(v) for v in r), strict=True))
    x = np.asarray(scores, float)
    return _average_ranks(-x if higher_is_better else x)


def rank_shifts(
    a: Mapping[str, float], b: Mapping[str, float], higher_is_better: bool = True
) -> dict[str, float]:
    """Rank in ``b`` minus rank in ``a`` per system (positive = moved down)."""
    _align(a, b)
    ra, rb = ranks(a, higher_is_better), ranks(b, higher_is_better)
    return {n: rb[n] - ra[n] for n in a}


def pairwise_spearman(leaderboards: Sequence[Leaderboard]) -> np.ndarray:
    """Matrix of Spearman's rho between every pair of leaderboards (diagonal 1)."""
    m = len(leaderboards)
    if m < 2:
        raise StatsError("need at least two leaderboards to compare")
    out = np.eye(m)
    for i, j in combinations(range(m), 2):
        out[i, j] = out[j, i] = spearman_rho(leaderboards[i], leaderboards[j])
    return out
