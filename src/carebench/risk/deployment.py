"""Detection apart from severity, and precision at an alert budget under a prior.

Beyond the Flag (Limitations) names what its purposive, all-suicide-related sample could
not measure: whether text is suicide-related at all (detection), and the precision a
deployed system would see at a fixed alert budget under a realistic prevalence. Both need
a negative stratum and, for a population estimate, the inclusion probabilities of the
sample. This module computes both from the run's records (docs/risk.md, "Detection,
severity and the alert budget"); severity stays in :mod:`carebench.risk.scoring`.

Each method's continuous risk score, where one exists:

- a fitted method (its records hold level probabilities and no model): the predicted
  probability of Behavior or Attempt;
- a moderation method: the self-harm signal it cut into levels;
- a prompted model with letter probabilities: the expected level ``sum_k k * p_k``;
- otherwise the discrete level it answered (ties are broken at random in expectation).

A failed item follows the run's failure policy: ``wrong`` gives it the worst score for its
truth (a positive never alerted, a negative always alerted), ``drop`` leaves it out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from carebench.risk.scale import LEVEL_NAMES
from carebench.stats.operating import (
    detection_metrics,
    level_sums,
    precision_at_budget,
    rates,
    score_levels,
    solve_budget,
)
from carebench.types import CarebenchError

#: deployment prevalences swept by default: 0.1% (suicide attempts within 90 days per
#: outpatient visit with a mental-health diagnosis, Simon et al. 2018: 24,133 after about
#: 20 million visits), 0.6% (the rate its top-5% figures imply for specialty mental-health
#: visits: 0.054 x 0.05 / 0.43), and 3% (our upper end for a crisis-adjacent service)
DEFAULT_PRIORS = (0.001, 0.006, 0.03)
#: shares of traffic that may raise an alert (5% is Simon et al. 2018's top-5% tier)
DEFAULT_BUDGETS = (0.01, 0.05, 0.10)
#: budgets of the figure's curves
CURVE_BUDGETS = tuple(round(x, 4) for x in np.linspace(0.0025, 0.25, 100))
#: "positive" for the alert budget: the lowest level counted (default: Behavior or
#: Attempt, the seed's high-risk split); "related" = any level against the negatives
POSITIVES = {"ideation": 1, "behavior": 2, "attempt": 3, "related": 0}
DEFAULT_POSITIVE = "behavior"
#: a method flags text as suicide-related at this level or above (its own threshold)
DETECTION_LEVEL = 1


def positive_name(key: str) -> str:
    if key == "related":
        return "suicide-related (any level) vs negative"
    low = POSITIVES[key]
    return " or ".join(LEVEL_NAMES[low:]) if low < 3 else LEVEL_NAMES[3]


def check_positive(key: str) -> str:
    k = str(key).strip().lower()
    if k not in POSITIVES:
        raise CarebenchError(f"--positive must be one of {', '.join(POSITIVES)}, got {key!r}")
    return k


def check_deployment_options(priors: Sequence[float] | None, budgets: Sequence[float] | None,
                             positive: str, net_benefit_pt: float | None) -> None:
    """Refuse out-of-range values in one line before any model call."""
    for p in priors or ():
        if not 0.0 < p < 1.0:
            raise CarebenchError(f"--prior must lie in (0, 1), got {p}")
    for b in budgets or ():
        if not 0.0 < b <= 1.0:
            raise CarebenchError(f"--alert-budget must lie in (0, 1], got {b}")
    check_positive(positive)
    if net_benefit_pt is not None and not 0.0 < net_benefit_pt < 1.0:
        raise CarebenchError(f"--net-benefit-pt must lie in (0, 1), got {net_benefit_pt}")


def score_kind(records: Sequence[Mapping[str, Any]]) -> str:
    ok = [r for r in records if r.get("status") == "ok"]
    details = [r.get("detail") or {} for r in ok]
    if ok and all("signal" in d for d in details):
        return "self-harm signal (moderation scores)"
    with_probs = [r for r in ok if r.get("probs") and len(r["probs"]) == 4]
    if ok and len(with_probs) == len(ok):
        return ("predicted probability of Behavior or Attempt" if not any(r.get("model") for r in ok)
                else "expected level from the answer letter's probabilities")
    if with_probs:
        return "expected level where letter probabilities were returned, else the answered level"
    return "answered level (discrete: ties broken at random, in expectation)"


def risk_score(r: Mapping[str, Any]) -> float:
    """One ok record's continuous risk score (module docstring)."""
    detail = r.get("detail") or {}
    if "signal" in detail:
        return float(detail["signal"])
    probs = r.get("probs")
    if probs and len(probs) == 4:
        if r.get("model"):
            return float(sum(k * float(p) for k, p in enumerate(probs)))
        return float(probs[2]) + float(probs[3])
    return float(r["pred"])


def _vectors(rows: Sequence[Mapping[str, Any]], policy: str) -> dict[str, np.ndarray]:
    """Scores, truth (level, -1 negative), flags, weights and strata of a method's scored items."""
    rows = [r for r in rows if r.get("status") != "excluded"]
    ok = [r.get("status") == "ok" and r.get("pred") is not None for r in rows]
    scores = [risk_score(r) for r, good in zip(rows, ok, strict=True) if good]
    lo, hi = (min(scores) - 1.0, max(scores) + 1.0) if scores else (-1.0, 1.0)
    out: dict[str, list] = {"score": [], "level": [], "flag": [], "weight": [], "stratum": []}
    for r, good in zip(rows, ok, strict=True):
        level = -1 if r.get("negative") else int(r["gold"])
        if not good:
            if policy == "drop":
                continue
            worst_high = level < 0  # a failed negative is alerted, a failed positive never
            out["score"].append(hi if worst_high else lo)
            out["flag"].append(worst_high)
        else:
            out["score"].append(risk_score(r))
            out["flag"].append(int(r["pred"]) >= DETECTION_LEVEL)
        out["level"].append(level)
        out["weight"].append(float(r.get("weight") or 1.0))
        out["stratum"].append(str(r.get("stratum") or ""))
    return {k: np.asarray(v) for k, v in out.items()}


def deployment_metrics(
    records: Sequence[Mapping[str, Any]],
    methods: Sequence[str],
    *,
    failures: str,
    priors: Sequence[float] = DEFAULT_PRIORS,
    budgets: Sequence[float] = DEFAULT_BUDGETS,
    positive: str = DEFAULT_POSITIVE,
    net_benefit_pt: float | None = None,
    B: int = 2000,
    seed: int = 42,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """``detection`` (when there are negatives) and ``budget`` results per method."""
    positive = check_positive(positive)
    has_neg = any(r.get("negative") for r in records)
    cuts = [k for k in POSITIVES if k != "related" or has_neg]
    out: dict[str, Any] = {
        "positive": positive, "positive_name": positive_name(positive), "priors": list(priors),
        "budgets": list(budgets), "detection_level": LEVEL_NAMES[DETECTION_LEVEL],
        "cut_points": {k: positive_name(k) for k in cuts}, "methods": {},
    }
    for name in methods:
        rows = [r for r in records if r["method"] == name]
        v = _vectors(rows, failures)
        entry: dict[str, Any] = {"score": score_kind(rows), "n": int(v["level"].size)}
        if v["level"].size == 0:
            out["methods"][name] = entry
            continue
        if has_neg:
            related = v["level"] >= 0
            entry["detection"] = _guard(lambda v=v, related=related: detection_metrics(
                v["score"], related, v["flag"], v["weight"], v["stratum"], B=B, seed=seed, alpha=alpha))
        entry["budget"] = {}
        for cut in cuts:
            pos = v["level"] >= POSITIVES[cut]
            entry["budget"][cut] = _guard(lambda pos=pos, v=v: precision_at_budget(
                v["score"], pos, priors, budgets, v["weight"], v["stratum"], B=B, seed=seed,
                alpha=alpha, net_benefit_pt=net_benefit_pt))
        pos = v["level"] >= POSITIVES[positive]
        if pos.any() and not pos.all():
            entry["curve"] = budget_curve(v["score"], pos, v["weight"], priors)
        out["methods"][name] = entry
    return out


def _guard(fn):
    """A result, or why there is none (e.g. no positives among the scored items)."""
    try:
        return fn()
    except ValueError as e:
        return {"unavailable": str(e)}


def budget_curve(score: np.ndarray, positive: np.ndarray, weight: np.ndarray,
                 priors: Sequence[float]) -> dict[str, Any]:
    """Point precision and recall over :data:`CURVE_BUDGETS`, per prior (the figure)."""
    levels, index = score_levels(np.asarray(score, float))
    tpr, fpr = rates(level_sums(index, levels.size, weight * positive),
                     level_sums(index, levels.size, weight * ~positive))
    out = {"budgets": list(CURVE_BUDGETS), "priors": {}}
    for prior in priors:
        pts = [solve_budget(tpr, fpr, prior, b) for b in CURVE_BUDGETS]
        out["priors"][str(prior)] = {"precision": [float(p["precision"]) for p in pts],
                                     "recall": [float(p["tpr"]) for p in pts]}
    return out
