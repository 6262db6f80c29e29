"""Inter-rater agreement: Fleiss' kappa, Gwet's AC1, Krippendorff's alpha and friends.

Ratings come in two layouts:

* ``ratings``: ``(n_items, n_raters)`` labels ``0..k-1``; missing ratings are
  ``NaN`` or any negative value (judges abstain, annotators skip items).
* ``counts``: ``(n_items, k)``, how many raters put item i in category j.

Krippendorff's alpha uses its own conventional layout ``(n_raters, n_items)``.
Cohen's kappa for two raters is :func:`carebench.stats.ordinal.cohen_kappa`.

Fleiss' kappa and AC1 with missing ratings follow Gwet (Handbook of
Inter-Rater Reliability, 4th ed., ch. 2-4): agreement ``pa`` averages over
items rated at least twice; category prevalence ``pi_k`` averages each item's
share ``r_ik / r_i`` over items rated at least once. With complete data these
reduce to Fleiss (1971) and Gwet (2008).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from itertools import combinations
from typing import Literal

import numpy as np

from carebench.stats._validation import StatsError, check_k
from carebench.stats.classification import macro_f1_from_cm


def _ratings(ratings: object, k: int | None) -> tuple[np.ndarray, int]:
    """Ratings as float (n_items, n_raters) with NaN for missing, plus k."""
    r = np.array(ratings, dtype=float)
    if r.ndim != 2:
        raise StatsError(f"ratings must be (n_items, n_raters), got shape {r.shape}")
    if r.size == 0:
        raise StatsError("ratings are empty: agreement needs at least one item and one rater")
    r[r < 0] = np.nan
    seen = r[~np.isnan(r)]
    if seen.size == 0:
        raise StatsError("ratings hold no observed value")
    if np.any(seen != np.round(seen)):
        raise StatsError("ratings must be integer category labels 0..k-1")
    if k is None:
        k = max(int(seen.max()) + 1, 2)
    k = check_k(k)
    if seen.max() >= k:
        raise StatsError(f"ratings must lie in 0..{k - 1}, found {int(seen.max())}")
    return r, k


def ratings_to_counts(ratings: object, k: int | None = None) -> np.ndarray:
    """Convert ``(n_items, n_raters)`` ratings (NaN/negative = missing) to ``(n_items, k)`` counts.

    ``k`` defaults to the largest observed label + 1; pass it explicitly when a
    category may go unused, because chance agreement depends on the number of
    categories for AC1.
    """
    r, k = _ratings(ratings, k)
    n = r.shape[0]
    items, _ = np.nonzero(~np.isnan(r))
    labels = r[~np.isnan(r)].astype(np.int64)
    return np.bincount(items * k + labels, minlength=n * k).reshape(n, k)


def _counts(counts: object) -> np.ndarray:
    c = np.asarray(counts, dtype=float)
    if c.ndim != 2 or c.shape[0] == 0:
        raise StatsError(f"counts must be a non-empty (n_items, k) array, got shape {c.shape}")
    if c.shape[1] < 2:
        raise StatsError("counts need at least two categories")
    if np.any(c < 0) or np.any(c != np.round(c)):
        raise StatsError("counts must be non-negative integers")
    return c


def _pa_pi(c: np.ndarray) -> tuple[float, np.ndarray]:
    """Observed pairwise agreement and mean category shares (Gwet's missing-data forms)."""
    r = c.sum(axis=1)
    multi = r >= 2
    if not multi.any():
        raise StatsError("agreement needs at least one item rated by two or more raters")
    cm = c[multi]
    rm = r[multi]
    pa = float(np.mean((cm * (cm - 1)).sum(axis=1) / (rm * (rm - 1))))
    rated = r >= 1
    pi = (c[rated] / r[rated, None]).mean(axis=0)
    return pa, pi


def fleiss_kappa(counts: object) -> float:
    """Fleiss' kappa from ``(n_items, k)`` category counts.

    Raters per item may vary (missing ratings); NaN when every rating falls in
    one category (chance agreement 1, kappa undefined).
    """
    c = _counts(counts)
    pa, pi = _pa_pi(c)
    pe = float(np.sum(pi**2))
    if np.isclose(pe, 1.0):
        return float("nan")
    return (pa - pe) / (1.0 - pe)


def gwet_ac1(ratings: object = None, k: int | None = None, *, counts: object = None) -> float:
    """Gwet's AC1 for two or more raters, binary or multi-category.

    Give either ``ratings`` ``(n_items, n_raters)`` (NaN/negative = missing) or
    ``counts`` ``(n_items, k)``. Chance agreement is
    ``pe = sum_k pi_k (1 - pi_k) / (q - 1)`` with q = number of categories, so
    pass ``k`` when some category is never used. Unlike kappa, AC1 stays stable
    when one category dominates (skewed met/not-met criteria).
    """
    if (ratings is None) == (counts is None):
        raise StatsError("give exactly one of ratings or counts")
    if counts is not None:
        c = _counts(counts)
        if k is not None and check_k(k) != c.shape[1]:
            raise StatsError(f"k={k} but counts have {c.shape[1]} categories")
    else:
        c = ratings_to_counts(ratings, k).astype(float)
    q = c.shape[1]
    pa, pi = _pa_pi(c)
    pe = float(np.sum(pi * (1 - pi)) / (q - 1))
    return (pa - pe) / (1.0 - pe)


def percent_agreement(ratings: object) -> float:
    """Share of agreeing rater pairs per item, averaged over items rated at least twice.

    For two raters this is the share of co-rated items with identical labels.
    """
    r, _ = _ratings(ratings, None)
    seen = r[~np.isnan(r)].astype(np.int64)
    k = int(seen.max()) + 1
    return _pa_pi(ratings_to_counts(r, max(k, 2)).astype(float))[0]


# ----------------------------------------------------------------------------- Krippendorff

AlphaLevel = Literal["nominal", "ordinal", "interval"]


def krippendorff_alpha(ratings: object, level: AlphaLevel = "nominal") -> float:
    """Krippendorff's alpha from ``(n_raters, n_items)`` values with NaN for missing.

    Built from the coincidence matrix (Krippendorff 2011, "Computing
    Krippendorff's alpha-reliability"): units with fewer than two values are
    not pairable and are ignored. Ordinal distances use the rank-based metric
    ``(sum_{g=c..k} n_g - (n_c + n_k)/2)^2`` over the values that occur.
    NaN when all pairable values are identical (no variation to explain).
    """
    data = np.array(ratings, dtype=float)
    if data.ndim != 2 or data.size == 0:
        raise StatsError(
            f"ratings must be a non-empty (n_raters, n_items) array, got shape {data.shape}"
        )
    observed = ~np.isnan(data)
    values = np.unique(data[observed])
    if values.size == 0:
        raise StatsError("ratings hold no observed value")
    v = values.size
    # Value counts per unit: (n_items, v).
    raters, items = np.nonzero(observed)
    codes = np.searchsorted(values, data[raters, items])
    n_items = data.shape[1]
    counts = np.bincount(items * v + codes, minlength=n_items * v).reshape(n_items, v).astype(float)
    m = counts.sum(axis=1)
    pairable = m >= 2
    if not pairable.any():
        raise StatsError("Krippendorff's alpha needs at least one unit with two or more values")
    cu, mu = counts[pairable], m[pairable]
    # Coincidences o_ck = sum_u (n_uc n_uk - [c==k] n_uc) / (m_u - 1).
    o = (cu / (mu - 1)[:, None]).T @ cu - np.diag((cu / (mu - 1)[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    delta = _alpha_distance(values, n_c, level)
    d_o = (o * delta).sum()
    d_e = (np.outer(n_c, n_c) * delta).sum() / (n - 1)
    if d_e == 0:
        return float("nan")
    return float(1.0 - d_o / d_e)


def _alpha_distance(values: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ordinal":
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        i, j = np.meshgrid(np.arange(values.size), np.arange(values.size), indexing="ij")
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        between = cum[hi + 1] - cum[lo]
        return (between - (n_c[i] + n_c[j]) / 2.0) ** 2
    raise StatsError(f"level must be 'nominal', 'ordinal' or 'interval', got {level!r}")


# ----------------------------------------------------------------------------- label sets


def jaccard(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    """|A & B| / |A | B|; two empty sets agree perfectly (1.0)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return 1.0 if not union else len(sa & sb) / len(union)


def mean_pairwise_jaccard(label_sets: Sequence[Sequence[Iterable[Hashable] | None]]) -> float:
    """Agreement on multi-label answers (e.g. sets of RESPONSE categories).

    ``label_sets[r][i]`` is rater r's set for item i (``None`` = not rated). For
    each item, Jaccard is averaged over rater pairs who both rated it; items
    (with at least one such pair) then count equally.
    """
    if len(label_sets) < 2:
        raise StatsError("mean_pairwise_jaccard needs at least two raters")
    n = {len(s) for s in label_sets}
    if len(n) != 1:
        raise StatsError(f"every rater must list the same items, got lengths {sorted(n)}")
    per_item = []
    for i in range(n.pop()):
        sets = [s[i] for s in label_sets if s[i] is not None]
        if len(sets) >= 2:
            per_item.append(np.mean([jaccard(a, b) for a, b in combinations(sets, 2)]))
    if not per_item:
        raise StatsError("no item was rated by two or more raters")
    return float(np.mean(per_item))


# ----------------------------------------------------------------------------- consensus

TieRule = Literal["drop", "high", "low"]


def majority_labels(ratings: object, k: int | None = None, tie: TieRule = "drop") -> np.ndarray:
    """Per-item majority label; -1 where nobody rated or (with ``tie="drop"``) the top is tied.

    ``tie="high"`` breaks ties toward the higher (more severe) level, as the
    majority-vote ensemble of Beyond the Flag (§4.3) does; ``"low"`` toward the lower one.
    """
    c = ratings_to_counts(ratings, k)
    top = c.max(axis=1, keepdims=True)
    winners = (c == top) & (top > 0)
    n_win = winners.sum(axis=1)
    k_ = c.shape[1]
    if tie == "high":
        out = k_ - 1 - np.argmax(winners[:, ::-1], axis=1)
    elif tie == "low":
        out = np.argmax(winners, axis=1)
    elif tie == "drop":
        out = np.where(n_win == 1, np.argmax(winners, axis=1), -1)
    else:
        raise StatsError(f"tie must be 'drop', 'high' or 'low', got {tie!r}")
    return np.where(top[:, 0] > 0, out, -1).astype(np.int64)


def rater_vs_consensus_macro_f1(
    ratings: object, k: int | None = None, consensus: object = None, tie: TieRule = "drop"
) -> np.ndarray:
    """Macro-F1 of each rater (column) against a consensus, one value per rater.

    Without ``consensus``, each rater is compared with the majority of the *other*
    raters (leave-one-out, so a rater never votes on its own reference). Items
    the rater skipped or whose consensus is undefined (-1) are left out.
    """
    r, k = _ratings(ratings, k)
    n_raters = r.shape[1]
    ref_given = None
    if consensus is not None:
        ref_given = np.asarray(consensus, dtype=float)
        if ref_given.shape != (r.shape[0],):
            raise StatsError(
                f"consensus must have one label per item ({r.shape[0]}), got {ref_given.shape}"
            )
        ref_given = np.where(np.isnan(ref_given), -1, ref_given).astype(np.int64)
    elif n_raters < 2:
        raise StatsError("leave-one-out consensus needs at least two raters")
    out = np.full(n_raters, np.nan)
    for j in range(n_raters):
        if ref_given is None:
            ref = majority_labels(np.delete(r, j, axis=1), k, tie)
        else:
            ref = ref_given
        mine = r[:, j]
        ok = (ref >= 0) & ~np.isnan(mine)
        if ok.any():
            t, p = ref[ok], mine[ok].astype(np.int64)
            cm = np.bincount(t * k + p, minlength=k * k).reshape(k, k)
            out[j] = float(macro_f1_from_cm(cm))
    return out
