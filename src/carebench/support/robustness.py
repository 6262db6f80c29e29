"""Judge robustness on a scored run (DistressBench Appendix B.6-B.7).

* **Leave-one-judge-out** (B.6): the leaderboard with each panel judge dropped in
  turn, and the leaderboard each vendor family's judges would give.
* **Self-preference** (B.7): whether judges favour responders of their own vendor
  family, from an additive fit of judge x responder pass rates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from carebench.models.families import FamilyMap, family_of
from carebench.stats.rank import ranks, spearman_rho
from carebench.support.records import REFERENCE
from carebench.support.scoring import Scored, TaskTable, model_scores, score

if TYPE_CHECKING:
    from carebench.support.records import ResponseTable, VerdictTable


def leave_one_judge_out(
    tasks: TaskTable,
    responses: ResponseTable,
    verdicts: VerdictTable,
    primary: Scored,
    *,
    family: FamilyMap = None,
) -> dict[str, Any]:
    """Leaderboards with each panel judge dropped in turn, and the own-family leaderboard (B.6).

    Dropping a judge leaves a 2-judge panel, where the strict-majority rule
    means *unanimity*: a 1-1 split earns no credit. Scores therefore fall by an
    artifact that depends on the dropped judge's leniency, so each removal gets
    its own baseline: the mean score change, over models outside the dropped
    judge's family, when that judge is removed. The own-family leaderboard
    scores every model without the panel judge(s) of its own family (models of
    no panel family keep the full panel), then adds back that judge-specific
    baseline; ``own_family_advantage`` = primary minus adjusted score (positive =
    the own-family judge favoured the model beyond its usual leniency).
    """
    panel = primary.panel
    models = [r for r in primary.responders if r != REFERENCE]
    if len(panel) < 2 or not models:
        return {"applicable": False, "reason": "needs a panel of at least two judges and one model"}
    base = model_scores(primary)
    fam_j = {j: family_of(j, family) for j in panel}
    fam_r = {r: family_of(r, family) for r in models}
    leniency = {}
    for j in panel:
        if j in primary.judge_names:
            k = primary.judge_names.index(j)
            n = primary.jr_n[k].sum()
            leniency[j] = float(primary.jr_met[k].sum() / n) if n else float("nan")
        else:
            leniency[j] = float("nan")
    drops: dict[str, Any] = {}
    dropped_scores: dict[str, dict[str, float]] = {}
    for j in panel:
        sc = score(tasks, responses, verdicts, panel=[p for p in panel if p != j], scope=primary.scope,
                   keys=primary.keys)
        s = model_scores(sc)
        dropped_scores[j] = s
        delta = {r: s[r] - base[r] for r in models}
        others = [delta[r] for r in models if fam_r[r] != fam_j[j] and not math.isnan(delta[r])]
        baseline = float(np.mean(others)) if others else float("nan")
        entry: dict[str, Any] = {
            "scores": {r: s[r] for r in models},
            "delta": delta,
            "baseline": baseline,
            "leniency": leniency[j],
            "cells_undecided": sc.counts["cells_undecided"],
        }
        if len(models) >= 2:
            entry["spearman_rho"] = spearman_rho({r: base[r] for r in models}, {r: s[r] for r in models})
            shifts = _rank_shift({r: base[r] for r in models}, {r: s[r] for r in models})
            entry["max_rank_shift"] = max(abs(v) for v in shifts.values())
            entry["top_unchanged"] = _top({r: base[r] for r in models}) == _top({r: s[r] for r in models})
        drops[j] = entry
    own_raw, own_adj, adv = {}, {}, {}
    for r in models:
        same = [j for j in panel if fam_j[j] == fam_r[r]]
        if not same or len(same) == len(panel):
            own_raw[r] = own_adj[r] = base[r]
            adv[r] = 0.0
            continue
        if len(same) == 1:
            j = same[0]
            own_raw[r] = dropped_scores[j][r]
            own_adj[r] = own_raw[r] - drops[j]["baseline"]
        else:  # several panel judges of the model's family: score with the rest of the panel
            sc = score(tasks, responses, verdicts, panel=[p for p in panel if p not in same], scope=primary.scope,
                       keys=primary.keys)
            own_raw[r] = own_adj[r] = model_scores(sc)[r]
        adv[r] = base[r] - own_adj[r]
    out: dict[str, Any] = {
        "applicable": True,
        "two_judge_rule": "strict majority of the 2 remaining judges = unanimity; a 1-1 split earns no credit",
        "families": {"judges": fam_j, "responders": fam_r},
        "leniency": leniency,
        "leniency_spread": float(np.nanmax(list(leniency.values())) - np.nanmin(list(leniency.values()))),
        "drop": drops,
        "own_family": {"raw": own_raw, "adjusted": own_adj, "own_family_advantage": adv},
    }
    if len(models) >= 2:
        b = {r: base[r] for r in models}
        out["own_family"]["spearman_rho"] = spearman_rho(b, own_adj)
        shifts = _rank_shift(b, own_adj)
        out["own_family"]["max_rank_shift"] = max(abs(v) for v in shifts.values())
        out["own_family"]["top_unchanged"] = _top(b) == _top(own_adj)
    return out


def _top(s: Mapping[str, float]) -> str:
    return max(s, key=lambda k: (s[k], k))


def _rank_shift(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    ra, rb = ranks(dict(a)), ranks(dict(b))
    return {k: float(rb[k] - ra[k]) for k in a}


def additive_fit(M: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Least-squares fit ``M[j, r] ~ mu + a_j + b_r`` over the observed (non-NaN) cells.

    Returns ``(mu, a, b, residual)`` with ``a`` and ``b`` centred to mean 0
    (for a complete matrix this is double centring). NaN cells stay NaN.
    """
    J, R = M.shape
    obs = ~np.isnan(M)
    jj, rr = np.nonzero(obs)
    X = np.zeros((jj.size, 1 + J + R))
    X[:, 0] = 1.0
    X[np.arange(jj.size), 1 + jj] = 1.0
    X[np.arange(jj.size), 1 + J + rr] = 1.0
    coef, *_ = np.linalg.lstsq(X, M[obs], rcond=None)
    a, b = coef[1 : 1 + J], coef[1 + J :]
    mu = coef[0] + a.mean() + b.mean()
    a, b = a - a.mean(), b - b.mean()
    resid = np.full_like(M, np.nan, dtype=float)
    resid[obs] = M[obs] - (mu + a[jj] + b[rr])
    return float(mu), a, b, resid


def self_preference_from_counts(
    judges: Sequence[str],
    responders: Sequence[str],
    jr_met: np.ndarray,
    jr_n: np.ndarray,
    family: FamilyMap = None,
) -> dict[str, Any]:
    """Judge x responder-family residuals of met-rates after judge leniency and responder effects (B.7)."""
    keep = [i for i, r in enumerate(responders) if r != REFERENCE]
    resp = [responders[i] for i in keep]
    if len(judges) < 2 or len(resp) < 2:
        return {"applicable": False, "reason": "needs at least two judges and two responders"}
    n = jr_n[:, keep].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        M = np.where(n > 0, jr_met[:, keep] / np.where(n > 0, n, 1), np.nan)
    mu, a, b, e = additive_fit(M)
    fam_r = [family_of(r, family) for r in resp]
    fams = sorted(set(fam_r))
    fam_j = [family_of(j, family) for j in judges]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        by_fam = {f: np.nanmean(e[:, [i for i, x in enumerate(fam_r) if x == f]], axis=1) for f in fams}
    residual = {j: {f: float(by_fam[f][k]) for f in fams} for k, j in enumerate(judges)}
    own: dict[str, Any] = {}
    for k, j in enumerate(judges):
        if fam_j[k] in fams:
            col = M[k]
            order = sorted([i for i in range(len(resp)) if not np.isnan(col[i])], key=lambda i: (-col[i], resp[i]))
            own[j] = {
                "family": fam_j[k],
                "residual": residual[j][fam_j[k]],
                "own_ranks_in_column": {resp[i]: order.index(i) + 1 for i in range(len(resp)) if fam_r[i] == fam_j[k]
                                        and i in order},
                "n_responders_in_column": len(order),
            }
    return {
        "applicable": True,
        "model": "met_rate[judge, responder] = mu + leniency[judge] + effect[responder] + residual "
        "(least squares over observed cells); residuals averaged by responder family",
        "grand_mean": mu,
        "leniency": {j: float(a[k]) for k, j in enumerate(judges)},
        "leniency_spread": float(a.max() - a.min()),
        "responder_effect": {r: float(b[i]) for i, r in enumerate(resp)},
        "met_rate": {j: {r: float(M[k, i]) for i, r in enumerate(resp)} for k, j in enumerate(judges)},
        "residual_by_family": residual,
        "own_family": own,
        "families": {"judges": dict(zip(judges, fam_j, strict=True)), "responders": dict(zip(resp, fam_r, strict=True))},
    }


def self_preference(sc: Scored, *, family: FamilyMap = None) -> dict[str, Any]:
    """Self-preference decomposition over every judge present in a scored run."""
    return self_preference_from_counts(sc.judge_names, sc.responders, sc.jr_met, sc.jr_n, family)


__all__ = ["additive_fit", "leave_one_judge_out", "self_preference", "self_preference_from_counts"]
