"""Coverage of the stratified bootstrap behind detection and precision at an alert budget.

Simulated data of known truth. A population of positives in two strata (70% with scores
N(1, 1), 30% with N(2.5, 1)) and of negatives in two strata (90% N(0, 1), 10% N(1, 1)).
Each simulation samples the same number of items from every stratum, so the inclusion
probabilities differ by stratum and each item carries the Horvitz-Thompson weight
(population share / sample size of its stratum). The true figures follow from the normal
distributions:

- AUROC = sum_ij a_i b_j Phi((mu_i - nu_j) / sqrt 2);
- at prior pi and budget b, the threshold t solves pi TPR(t) + (1 - pi) FPR(t) = b, and
  recall@b = TPR(t), precision@b = pi TPR(t) / b.

For every simulation the 95% percentile interval of ``carebench.stats.operating`` (B
resamples of positives and negatives separately within strata, t_b solved again in each)
either covers the truth or not. The target is 93-97% over 400 simulations.

Run: ``python benchmarks/risk_budget_coverage.py [--sims 400] [--per-stratum 100] [--B 1000]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from carebench.stats.operating import detection_metrics, precision_at_budget

POS = ((0.7, 1.0), (0.3, 2.5))  # (population share, mean score) per positive stratum
NEG = ((0.9, 0.0), (0.1, 1.0))
PRIOR, BUDGET = 0.02, 0.05


def truth() -> dict[str, float]:
    tpr = lambda t: sum(a * norm.sf(t - m) for a, m in POS)
    fpr = lambda t: sum(b * norm.sf(t - m) for b, m in NEG)
    t = brentq(lambda t: PRIOR * tpr(t) + (1 - PRIOR) * fpr(t) - BUDGET, -10, 10)
    auc = sum(a * b * norm.cdf((mp - mn) / np.sqrt(2)) for a, mp in POS for b, mn in NEG)
    return {"recall": tpr(t), "precision": PRIOR * tpr(t) / BUDGET, "auroc": auc}


def sample(rng: np.random.Generator, n: int):
    scores, positive, weight, strata = [], [], [], []
    for label, cls, parts in (("p", True, POS), ("n", False, NEG)):
        for k, (share, mean) in enumerate(parts):
            scores.append(rng.normal(mean, 1.0, n))
            positive.append(np.full(n, cls))
            weight.append(np.full(n, share / n))
            strata.append(np.full(n, f"{label}{k}"))
    return (np.concatenate(scores), np.concatenate(positive), np.concatenate(weight),
            np.concatenate(strata))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--per-stratum", type=int, default=100)
    ap.add_argument("--B", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20260714)
    args = ap.parse_args()
    true = truth()
    rng = np.random.default_rng(args.seed)
    hits = {k: 0 for k in true}
    t0 = time.perf_counter()
    for sim in range(args.sims):
        s, y, w, strata = sample(rng, args.per_stratum)
        point = precision_at_budget(s, y, [PRIOR], [BUDGET], w, strata, B=args.B, seed=sim)[0]
        det = detection_metrics(s, y, s > 1.0, w, strata, B=args.B, seed=sim)
        for key, cell in (("recall", point["recall"]), ("precision", point["precision"]),
                          ("auroc", det["auroc"])):
            lo, hi = cell["ci"]
            hits[key] += int(lo <= true[key] <= hi)
    elapsed = time.perf_counter() - t0
    print(f"truth: prior {PRIOR}, budget {BUDGET}: " + ", ".join(f"{k} {v:.4f}" for k, v in true.items()))
    print(f"{args.sims} simulations, {4 * args.per_stratum} items each (4 strata), B={args.B}, "
          f"95% percentile intervals; {elapsed:.1f} s; load average {os.getloadavg()[0]:.2f}")
    for key, n in hits.items():
        print(f"coverage {key}@b: {100 * n / args.sims:.1f}%" if key != "auroc"
              else f"coverage weighted AUROC: {100 * n / args.sims:.1f}%")


if __name__ == "__main__":
    main()
