"""Leaderboard bands: which adjacent systems can actually be told apart.

Systems are ordered by score (descending); each adjacent gap is tested with a
paired bootstrap on the same resamples (seed 12345). A gap is *separated* when
the percentile interval of the difference excludes 0. A band is a maximal run
of systems with no separated gap between neighbours, as in DistressBench, §4.1 and
E.1 (25 models, 11 of 24 gaps separated -> 12 bands). All gaps share one set of
resamples, computed once for every system, so the test is vectorized and
identical to calling :func:`~carebench.stats.bootstrap.paired_bootstrap` pair by pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from carebench.stats._validation import StatsError, check_alpha
from carebench.stats.bootstrap import (
    DEFAULT_B,
    PAIRED_SEED,
    PairedResult,
    Resampler,
    _paired_from_samples,
    _values,
    _weighted_means,
    bootstrap_metric_samples,
)
from carebench.stats.metrics import CM_METRICS, LOWER_IS_BETTER, resolve_names


@dataclass(frozen=True)
class Gap:
    """Paired test between two neighbours in the ranking (``upper`` ranked above ``lower``)."""

    upper: str
    lower: str
    result: PairedResult

    @property
    def separated(self) -> bool:
        return self.result.separated


@dataclass
class Band:
    """Systems that cannot be separated from their neighbours, best first."""

    members: list[str]
    lo_score: float
    hi_score: float
    #: Tests between consecutive members (none of them separated).
    gaps_within: list[Gap] = field(default_factory=list)
    #: The separated gap to the next band below (None for the last band).
    gap_below: Gap | None = None


def bands_from_samples(
    names: list[str],
    values: np.ndarray,
    samples: np.ndarray,
    alpha: float = 0.05,
    lower_is_better: bool = False,
    B: int = DEFAULT_B,
    seed: int = PAIRED_SEED,
) -> list[Band]:
    """Bands from point values ``(S,)`` and shared-resample statistics ``(S, B)``."""
    check_alpha(alpha)
    if len(names) == 0:
        raise StatsError("bands need at least one system")
    if len(set(names)) != len(names):
        raise StatsError("system names must be unique")
    values = np.asarray(values, dtype=float)
    # Best first; ties broken by name so the ranking is deterministic.
    key = values if lower_is_better else -values
    order = sorted(range(len(names)), key=lambda i: (key[i], names[i]))
    gaps = [
        Gap(
            names[i],
            names[j],
            _paired_from_samples(
                values[i], values[j], samples[i], samples[j], alpha, B, seed, lower_is_better
            ),
        )
        for i, j in pairwise(order)
    ]
    out: list[Band] = []
    current, within = [order[0]], []
    for gap, nxt in zip(gaps, order[1:], strict=True):
        if gap.separated:
            out.append(_band(names, values, current, within, gap))
            current, within = [nxt], []
        else:
            current.append(nxt)
            within.append(gap)
    out.append(_band(names, values, current, within, None))
    return out


def _band(
    names: list[str], values: np.ndarray, idx: list[int], within: list[Gap], below: Gap | None
) -> Band:
    v = values[idx]
    return Band([names[i] for i in idx], float(v.min()), float(v.max()), within, below)


def bands(
    scores: Mapping[str, object],
    B: int = DEFAULT_B,
    seed: int = PAIRED_SEED,
    alpha: float = 0.05,
    groups: object = None,
) -> list[Band]:
    """Band structure of systems scored per item (``scores[name]`` has one value per item).

    The system score is the mean over items; ``groups`` resamples whole clusters.
    """
    if not scores:
        raise StatsError("bands need at least one system")
    names = list(scores)
    X = np.stack([_values(scores[n], f"scores[{n!r}]") for n in names], axis=1)
    rs = Resampler(X.shape[0], B, seed, groups)
    return bands_from_samples(
        names, X.mean(axis=0), _weighted_means(X, rs), alpha, False, rs.B, rs.seed
    )


def all_gaps(band_list: list[Band]) -> list[Gap]:
    """Every adjacent-gap test, in ranking order."""
    out: list[Gap] = []
    for band in band_list:
        out.extend(band.gaps_within)
        if band.gap_below is not None:
            out.append(band.gap_below)
    return out


def metric_bands(
    y_true: object,
    preds: Mapping[str, object],
    k: int,
    name: str,
    B: int = DEFAULT_B,
    seed: int = PAIRED_SEED,
    alpha: float = 0.05,
    groups: object = None,
) -> list[Band]:
    """Bands of classifiers by a metric of :data:`CM_METRICS` (e.g. macro-F1), vectorized."""
    if not preds:
        raise StatsError("metric_bands needs at least one system")
    (name,) = resolve_names([name])
    names = list(preds)
    P = np.stack([np.asarray(preds[n]) for n in names])
    samples = bootstrap_metric_samples(y_true, P, k, [name], B, seed, groups)[name]
    if samples.ndim == 1:
        samples = samples[None, :]
    t = np.asarray(y_true, dtype=np.int64)
    full = np.stack(
        [np.bincount(t * k + p, minlength=k * k).reshape(k, k) for p in P.astype(np.int64)]
    )
    values = CM_METRICS[name](full)
    return bands_from_samples(names, values, samples, alpha, name in LOWER_IS_BETTER, B, seed)
