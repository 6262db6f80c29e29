"""A risk score against a binary truth, weighted: detection metrics and the alert budget.

Why one module: AUROC, average precision, and precision at an alert budget under a
deployment prior are all read off the same object, the weighted counts of positives and
negatives at each distinct score level (highest first). Weights are Horvitz-Thompson
weights (1 / inclusion probability; all 1 for a simple sample), so every figure is an
estimate for the population the sample was drawn from.

Precision at an alert budget (Simon et al. 2018, "Predicting suicide attempts and
suicide deaths following outpatient visits using electronic health records"; Belsher
et al. 2019, "Prediction models for suicide attempts and deaths: a systematic review and
simulation"): under a deployment prevalence ``pi``,

- ``PPV_pi(t) = pi*TPR(t) / (pi*TPR(t) + (1-pi)*FPR(t))``, the precision of the sample
  after reweighting positives by ``pi/pi_s`` and negatives by ``(1-pi)/(1-pi_s)``
  (``pi_s`` the sample's weighted positive share; TPR and FPR are unchanged by it);
- alert rate ``a_pi(t) = pi*TPR(t) + (1-pi)*FPR(t)``;
- the budget threshold ``t_b`` is the lowest score level whose alert rate is at most
  ``b`` (closest to ``b`` from below). Items at the next level down, which the budget
  cuts through, are alerted at random with the share ``q`` that brings the expected alert
  rate to exactly ``b``; every figure is that expectation (ratio of expected counts),
  never one random draw. Discrete scores tie a lot; a continuous score's "level" is one
  item, and ``q`` splits it.

Intervals resample positives and negatives separately within each stratum (cells =
stratum x class) and re-solve ``t_b`` in every resample.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from carebench.stats._validation import StatsError, check_alpha
from carebench.stats.bootstrap import percentile_interval
from carebench.stats.stratified import cell_multiplicities

#: a budget whose alert rate equals a level's to this tolerance takes that level whole
_TIE = 1e-12


def _inputs(score: object, positive: object, weights: object | None) -> tuple[np.ndarray, ...]:
    s = np.asarray(score, dtype=float)
    y = np.asarray(positive, dtype=bool)
    if s.ndim != 1 or s.size == 0 or y.shape != s.shape:
        raise StatsError("score and positive must be non-empty one-dimensional arrays of one length")
    if not np.all(np.isfinite(s)):
        raise StatsError("score contains NaN or infinite values")
    w = np.ones(s.size) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != s.shape or np.any(w <= 0) or not np.all(np.isfinite(w)):
        raise StatsError("weights must be positive and finite, one per item")
    if not y.any() or y.all():
        raise StatsError("both classes must occur (positives and negatives)")
    return s, y, w


def score_levels(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct score levels, highest first; each item's level index)."""
    levels, inverse = np.unique(score, return_inverse=True)
    return levels[::-1], (levels.size - 1 - inverse)


def level_sums(index: np.ndarray, n_levels: int, w: np.ndarray,
               mult: np.ndarray | None = None) -> np.ndarray:
    """Weighted counts per level: ``(L,)``, or ``(B, L)`` with resample multiplicities."""
    onehot = np.zeros((index.size, n_levels))
    onehot[np.arange(index.size), index] = 1.0
    return (w @ onehot) if mult is None else (mult * w[None, :]) @ onehot


def rates(pos: np.ndarray, neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TPR and FPR of alerting at or above each level, with "alert none" first: ``(..., L+1)``."""
    zero = np.zeros(pos.shape[:-1] + (1,))
    tp = np.concatenate([zero, np.cumsum(pos, axis=-1)], axis=-1)
    fp = np.concatenate([zero, np.cumsum(neg, axis=-1)], axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return tp / tp[..., -1:], fp / fp[..., -1:]


def auroc_from_levels(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """P(score of a positive > score of a negative) + half the ties, weighted."""
    n_total = neg.sum(axis=-1, keepdims=True)
    below = n_total - np.cumsum(neg, axis=-1)  # negatives strictly below each level
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + 0.5 * neg)).sum(axis=-1) / (pos.sum(axis=-1) * n_total[..., 0])


def average_precision_from_levels(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Average precision (scikit-learn's step sum: ``sum_l (R_l - R_{l-1}) * P_l``), weighted."""
    tp = np.cumsum(pos, axis=-1)
    fp = np.cumsum(neg, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        recall = tp / tp[..., -1:]
    step = np.diff(np.concatenate([np.zeros(recall.shape[:-1] + (1,)), recall], axis=-1), axis=-1)
    return (step * precision).sum(axis=-1)


def solve_budget(tpr: np.ndarray, fpr: np.ndarray, prior: float, budget: float) -> dict[str, np.ndarray]:
    """The operating point of budget ``b`` under prior ``pi`` (leading axes: resamples).

    Returns per point ``j`` (levels alerted whole: 0 = none), ``q`` (share of level ``j``,
    0-based among levels, alerted at random), expected ``tpr`` and ``fpr``, ``alert_rate``,
    ``precision``."""
    a = prior * tpr + (1 - prior) * fpr
    n_points = a.shape[-1]
    j = np.clip((a <= budget + _TIE).sum(axis=-1) - 1, 0, n_points - 1)
    jn = np.minimum(j + 1, n_points - 1)
    take = lambda x, i: np.take_along_axis(x, i[..., None], axis=-1)[..., 0]
    a_j, a_n = take(a, j), take(a, jn)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(jn > j, np.clip((budget - a_j) / (a_n - a_j), 0.0, 1.0), 0.0)
    tpr_b = take(tpr, j) + q * (take(tpr, jn) - take(tpr, j))
    fpr_b = take(fpr, j) + q * (take(fpr, jn) - take(fpr, j))
    alert = prior * tpr_b + (1 - prior) * fpr_b
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(alert > 0, prior * tpr_b / alert, np.nan)
    return {"j": j, "q": q, "tpr": tpr_b, "fpr": fpr_b, "alert_rate": alert, "precision": precision}


def _cells(strata: object | None, y: np.ndarray) -> np.ndarray:
    base = np.full(y.size, "", dtype=object) if strata is None else np.asarray(strata, dtype=object).astype(str)
    if base.shape != y.shape:
        raise StatsError(f"strata must have one entry per item ({y.size})")
    return np.array([f"{s}\x1f{int(c)}" for s, c in zip(base, y, strict=True)], dtype=object)


def _interval(samples: np.ndarray, alpha: float) -> list[float | None]:
    lo, hi = percentile_interval(np.asarray(samples, dtype=float), alpha)
    return [None if np.isnan(lo) else float(lo), None if np.isnan(hi) else float(hi)]


def _value(v: Any) -> float | None:
    v = float(v)
    return None if np.isnan(v) else v


def detection_metrics(
    score: object,
    positive: object,
    flag: object,
    weights: object | None = None,
    strata: object | None = None,
    B: int = 2000,
    seed: int = 42,
    alpha: float = 0.05,
) -> dict[str, dict[str, Any]]:
    """AUROC and AUPRC of ``score``, sensitivity and specificity of the method's own
    ``flag``, all weighted, with a bootstrap of positives and negatives within strata."""
    check_alpha(alpha)
    s, y, w = _inputs(score, positive, weights)
    f = np.asarray(flag, dtype=bool)
    if f.shape != s.shape:
        raise StatsError("flag must have one entry per item")
    levels, index = score_levels(s)
    mult = cell_multiplicities(_cells(strata, y), B, seed)
    pos, neg = level_sums(index, levels.size, w * y), level_sums(index, levels.size, w * ~y)
    bpos, bneg = level_sums(index, levels.size, w * y, mult), level_sums(index, levels.size, w * ~y, mult)
    wy, wn = w * y, w * ~y
    values = {
        "auroc": (auroc_from_levels(pos, neg), auroc_from_levels(bpos, bneg)),
        "auprc": (average_precision_from_levels(pos, neg), average_precision_from_levels(bpos, bneg)),
        "sensitivity": ((wy * f).sum() / wy.sum(), (mult @ (wy * f)) / (mult @ wy)),
        "specificity": ((wn * ~f).sum() / wn.sum(), (mult @ (wn * ~f)) / (mult @ wn)),
    }
    return {k: {"value": _value(v), "ci": _interval(b, alpha)} for k, (v, b) in values.items()}


def precision_at_budget(
    score: object,
    positive: object,
    priors: Sequence[float],
    budgets: Sequence[float],
    weights: object | None = None,
    strata: object | None = None,
    B: int = 2000,
    seed: int = 42,
    alpha: float = 0.05,
    net_benefit_pt: float | None = None,
) -> list[dict[str, Any]]:
    """One entry per (prior, budget): ``t_b``, the boundary level and its random share,
    precision@b (``PPV_pi``), recall@b (``TPR``), the number needed to evaluate
    (1 / precision), alerts and true alerts per 10,000 messages, optionally the net
    benefit at threshold probability ``p_t``, each with its interval."""
    check_alpha(alpha)
    s, y, w = _inputs(score, positive, weights)
    for p in priors:
        if not 0.0 < p < 1.0:
            raise StatsError(f"a prior must lie in (0, 1), got {p}")
    for b in budgets:
        if not 0.0 < b <= 1.0:
            raise StatsError(f"an alert budget must lie in (0, 1], got {b}")
    if net_benefit_pt is not None and not 0.0 < net_benefit_pt < 1.0:
        raise StatsError(f"a threshold probability must lie in (0, 1), got {net_benefit_pt}")
    levels, index = score_levels(s)
    mult = cell_multiplicities(_cells(strata, y), B, seed)
    tpr, fpr = rates(level_sums(index, levels.size, w * y), level_sums(index, levels.size, w * ~y))
    btpr, bfpr = rates(level_sums(index, levels.size, w * y, mult),
                       level_sums(index, levels.size, w * ~y, mult))
    sample_share = float((w * y).sum() / w.sum())
    out = []
    for prior in priors:
        for budget in budgets:
            pt = solve_budget(tpr, fpr, prior, budget)
            bt = solve_budget(btpr, bfpr, prior, budget)
            j, q = int(pt["j"]), float(pt["q"])
            figures = {
                "precision": (pt["precision"], bt["precision"]),
                "recall": (pt["tpr"], bt["tpr"]),
                "fpr": (pt["fpr"], bt["fpr"]),
                "number_needed_to_evaluate": (1 / pt["precision"], 1 / bt["precision"]),
                "alerts_per_10k": (1e4 * pt["alert_rate"], 1e4 * bt["alert_rate"]),
                "true_alerts_per_10k": (1e4 * prior * pt["tpr"], 1e4 * prior * bt["tpr"]),
            }
            if net_benefit_pt is not None:
                odds = net_benefit_pt / (1 - net_benefit_pt)
                figures["net_benefit"] = (prior * pt["tpr"] - (1 - prior) * pt["fpr"] * odds,
                                          prior * bt["tpr"] - (1 - prior) * bt["fpr"] * odds)
            with np.errstate(invalid="ignore", divide="ignore"):
                entry: dict[str, Any] = {
                    "prior": float(prior), "budget": float(budget), "sample_positive_share": sample_share,
                    # alert when score >= threshold (None: no level fits wholly in the budget)
                    "threshold": float(levels[j - 1]) if j >= 1 else None,
                    "threshold_alert_rate": float(prior * tpr[j] + (1 - prior) * fpr[j]),
                    "boundary_level": float(levels[j]) if j < levels.size and q > 0 else None,
                    "boundary_share": q,
                    **{k: {"value": _value(v), "ci": _interval(b, alpha)} for k, (v, b) in figures.items()},
                }
            if net_benefit_pt is not None:
                entry["net_benefit_pt"] = float(net_benefit_pt)
            out.append(entry)
    return out
