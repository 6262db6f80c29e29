"""Time the vectorized metric bootstrap against scikit-learn in a loop over resamples.

Workload (seeds/001 scale): 516 items, 4 levels, 20 systems, 7 metrics
(accuracy, macro-F1, weighted-F1, QWK, MAE, adjacent accuracy, high-risk F1),
B = 2000 resamples, each with a 95% percentile interval.

The naive path draws the *same* resamples (``Resampler.row_indices``) and calls
scikit-learn per resample, per system, per metric. It is run on a reduced
number of resamples and extrapolated linearly to B (its cost is linear in B);
the output says so. Its values are checked against the vectorized samples on
the resamples both computed, so the speed-up compares equal work.

Run: ``python benchmarks/stats_bootstrap.py [--naive-b 50] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from carebench.stats import Resampler, bootstrap_metric_samples, bootstrap_metrics

N_ITEMS, K, N_SYSTEMS, B, SEED = 516, 4, 20, 2000, 42
METRICS = ["accuracy", "macro_f1", "weighted_f1", "qwk", "mae", "adjacent_accuracy", "high_risk_f1"]


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Label counts of seeds/001 (127, 54, 123, 212) and 20 systems of varying skill."""
    rng = np.random.default_rng(seed)
    y = rng.permutation(np.repeat(np.arange(K), [127, 54, 123, 212]))
    skill = np.linspace(0.3, 0.7, N_SYSTEMS)[:, None]
    noise = np.clip(y[None, :] + rng.integers(-2, 3, size=(N_SYSTEMS, N_ITEMS)), 0, K - 1)
    preds = np.where(rng.random((N_SYSTEMS, N_ITEMS)) < skill, y[None, :], noise)
    return y, preds


def naive(y: np.ndarray, preds: np.ndarray, b_naive: int) -> dict[str, np.ndarray]:
    """scikit-learn per resample, per system, per metric (the loop we avoid)."""
    from sklearn import metrics as skm

    labels = list(range(K))
    out = {m: np.empty((len(preds), b_naive)) for m in METRICS}
    rs = Resampler(len(y), b_naive, SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b, idx in enumerate(rs.row_indices()):
            t = y[idx]
            for s, pred in enumerate(preds):
                p = pred[idx]
                out["accuracy"][s, b] = skm.accuracy_score(t, p)
                out["macro_f1"][s, b] = skm.f1_score(
                    t, p, labels=labels, average="macro", zero_division=0
                )
                out["weighted_f1"][s, b] = skm.f1_score(
                    t, p, labels=labels, average="weighted", zero_division=0
                )
                out["qwk"][s, b] = skm.cohen_kappa_score(t, p, labels=labels, weights="quadratic")
                out["mae"][s, b] = skm.mean_absolute_error(t, p)
                out["adjacent_accuracy"][s, b] = np.mean(np.abs(t - p) <= 1)
                out["high_risk_f1"][s, b] = skm.f1_score(t >= K // 2, p >= K // 2, zero_division=0)
    for m in METRICS:
        np.percentile(out[m], [2.5, 97.5], axis=1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--naive-b", type=int, default=50, help="resamples actually run on the naive path"
    )
    ap.add_argument("--repeats", type=int, default=3, help="vectorized timing: best of N runs")
    args = ap.parse_args()

    y, preds = make_data()
    print(
        f"workload: {len(METRICS)} metrics x {N_SYSTEMS} systems x {B} resamples, "
        f"{N_ITEMS} items, {K} levels, 95% percentile intervals"
    )

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        res = bootstrap_metrics(y, preds, K, names=METRICS, B=B, seed=SEED)
        times.append(time.perf_counter() - t0)
    vec = min(times)
    print(
        f"vectorized (carebench.stats.bootstrap_metrics): {vec:.3f} s "
        f"(best of {args.repeats}: {', '.join(f'{t:.3f}' for t in times)})"
    )
    best = res[-1]
    print(
        "  e.g. system 20: "
        + ", ".join(
            f"{m} {best[m]['value']:.3f} [{best[m]['ci'][0]:.3f}, {best[m]['ci'][1]:.3f}]"
            for m in METRICS[:3]
        )
    )

    t0 = time.perf_counter()
    ref = naive(y, preds, args.naive_b)
    naive_run = time.perf_counter() - t0
    naive_full = naive_run * B / args.naive_b
    print(
        f"naive (scikit-learn in a loop): {naive_run:.2f} s for {args.naive_b} resamples "
        f"-> extrapolated to {B} resamples: {naive_full:.1f} s (linear in B)"
    )
    print(f"speed-up: {naive_full / vec:.0f}x")

    # Same resamples, same numbers: the first naive_b vectorized resamples must match.
    samples = bootstrap_metric_samples(y, preds, K, METRICS, B=B, seed=SEED)
    worst = max(float(np.max(np.abs(samples[m][:, : args.naive_b] - ref[m]))) for m in METRICS)
    print(f"max |vectorized - scikit-learn| over the shared {args.naive_b} resamples: {worst:.2e}")
    status = "OK" if vec < 2.0 else "ABOVE TARGET"
    print(f"target < 2 s for the vectorized path: {status}")


if __name__ == "__main__":
    main()
