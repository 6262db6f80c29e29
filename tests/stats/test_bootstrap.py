"""Bootstraps: coverage, equivalence with naive loops, cluster integrity, paired tests.

Coverage tests draw their data and resamples from fixed seeds, so they are
deterministic and cannot flake; their tolerance bands are nevertheless wide
enough (>= 3 binomial standard deviations around the nominal level) that a
correct implementation would pass for almost any seed, and narrow enough that
a wrong interval (e.g. 90% instead of 95%, or resampling rows when groups are
correlated) fails.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

from carebench import stats


def _coverage(intervals: list[tuple[float, float, float]], truth: float) -> float:
    return float(np.mean([lo <= truth <= hi for _, lo, hi in intervals]))


def test_percentile_interval_for_a_known_mean_covers_about_95_percent():
    # 2000 data sets of n=80 from N(0.3, 1). The percentile bootstrap of a mean
    # undercovers slightly at this n: its spread uses the plug-in SD (factor
    # sqrt(79/80)) and normal rather than t quantiles, so the expected coverage is
    # P(|t_79| < 1.96 * 0.994) = 0.945, about 0.94 after B=500 percentile noise.
    # Binomial SD over 2000 data sets = 0.0053: accept 0.94 +/- 3 SD = [0.925, 0.965].
    R, truth = 2000, 0.3
    data = np.random.default_rng(2024).normal(truth, 1.0, size=(R, 80))
    cis = [stats.bootstrap_mean_ci(data[r], B=500, seed=r) for r in range(R)]
    cov = _coverage(cis, truth)
    assert 0.925 <= cov <= 0.965, cov
    # The same data with a 90% interval must cover visibly less (the test can fail).
    cis90 = [stats.bootstrap_mean_ci(data[r], B=500, seed=r, alpha=0.10) for r in range(400)]
    assert _coverage(cis90, truth) < 0.93


def test_cluster_bootstrap_covers_where_item_bootstrap_does_not():
    # 1000 data sets of 40 clusters x 5 rows with a strong cluster effect. Resampling
    # rows ignores the correlation and undercovers badly; resampling clusters does not.
    R, truth, G, m = 1000, 0.0, 40, 5
    groups = np.repeat(np.arange(G), m)

    def draw(rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0, 1, G)[groups] + rng.normal(0, 0.5, G * m)

    rng = np.random.default_rng(7)
    data = [draw(rng) for _ in range(R)]
    clus = [stats.cluster_bootstrap_mean(data[r], groups, B=400, seed=r) for r in range(R)]
    # 1000 draws: binomial SD 0.007; allow the small-G (40 clusters) undercoverage.
    cov_cluster = _coverage(clus, truth)
    assert 0.91 <= cov_cluster <= 0.975, cov_cluster
    items = [stats.bootstrap_mean_ci(data[r], B=400, seed=r) for r in range(300)]
    assert _coverage(items, truth) < 0.80


def test_metric_interval_coverage_for_known_accuracy():
    # Accuracy is a mean of 0/1 hits: 300 data sets of 200 items, P(hit) = 0.7 exactly.
    # Binomial SD of coverage = 0.0126; accept [0.91, 0.99].
    R, truth, n = 300, 0.7, 200
    rng = np.random.default_rng(11)
    hits = 0
    for r in range(R):
        y = rng.integers(0, 4, n)
        wrong = (y + rng.integers(1, 4, n)) % 4
        pred = np.where(rng.random(n) < truth, y, wrong)
        lo, hi = stats.bootstrap_metrics(y, pred, 4, names=["accuracy"], B=500, seed=r)["accuracy"][
            "ci"
        ]
        hits += lo <= truth <= hi
    assert 0.91 <= hits / R <= 0.99, hits / R


def _data(S=3, n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    P = np.clip(y[None, :] + rng.integers(-2, 3, size=(S, n)), 0, 3)
    return y, P


def test_vectorized_samples_equal_sklearn_in_a_loop_over_the_same_resamples():
    y, P = _data()
    B, seed = 60, 5
    got = stats.bootstrap_metric_samples(y, P, 4, B=B, seed=seed)
    rs = stats.Resampler(len(y), B, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for b, idx in enumerate(rs.row_indices()):
            t = y[idx]
            for s in range(P.shape[0]):
                p = P[s, idx]
                ref = {
                    "accuracy": skm.accuracy_score(t, p),
                    "macro_f1": skm.f1_score(
                        t, p, average="macro", zero_division=0
                    ),
                    "weighted_f1": skm.f1_score(
                        t, p, labels=range(4), average="weighted", zero_division=0
                    ),
                    "qwk": skm.cohen_kappa_score(t, p, labels=range(4), weights="quadratic"),
                    "mae": skm.mean_absolute_error(t, p),
                    "high_risk_f1": skm.f1_score(t >= 2, p >= 2, zero_division=0),
                    "adjacent_accuracy": np.mean(np.abs(t - p) <= 1),
                }
                for name, v in ref.items():
                    assert got[name][s, b] == pytest.approx(v, abs=1e-12), (name, s, b)


def test_bootstrap_metrics_values_and_interval_from_samples():
    y, P = _data()
    res = stats.bootstrap_metrics(y, P, 4, B=300, seed=9)
    samples = stats.bootstrap_metric_samples(y, P, 4, B=300, seed=9)
    assert isinstance(res, list) and len(res) == 3
    for s in range(3):
        point = stats.compute_metrics(y, P[s], 4)
        for name in stats.RISK_METRICS:
            assert res[s][name]["value"] == pytest.approx(point[name])
            lo, hi = np.percentile(samples[name][s], [2.5, 97.5])
            assert res[s][name]["ci"] == pytest.approx((lo, hi))
    one = stats.bootstrap_metrics(y, P[1], 4, B=300, seed=9)
    assert one["macro_f1"] == res[1]["macro_f1"]


def test_seeds_default_to_42_for_items_and_12345_for_clusters():
    y, P = _data()
    groups = np.arange(len(y)) // 4
    default = stats.bootstrap_metrics(y, P[0], 4, names=["qwk"], B=200)
    assert default == stats.bootstrap_metrics(y, P[0], 4, names=["qwk"], B=200, seed=42)
    assert default != stats.bootstrap_metrics(y, P[0], 4, names=["qwk"], B=200, seed=43)
    clus = stats.bootstrap_metrics(y, P[0], 4, names=["qwk"], B=200, groups=groups)
    assert clus == stats.bootstrap_metrics(
        y, P[0], 4, names=["qwk"], B=200, groups=groups, seed=12345
    )
    assert stats.bootstrap_ci(np.mean, y, B=50) == stats.bootstrap_ci(np.mean, y, B=50, seed=42)


def test_generic_and_vectorized_bootstraps_see_the_same_resamples():
    x = np.random.default_rng(1).normal(size=97)
    groups = np.random.default_rng(2).integers(0, 25, size=97)
    assert stats.bootstrap_ci(np.mean, x, B=300, seed=3) == pytest.approx(
        stats.bootstrap_mean_ci(x, B=300, seed=3), abs=1e-12
    )
    assert stats.bootstrap_ci(np.mean, x, B=300, seed=3, groups=groups) == pytest.approx(
        stats.cluster_bootstrap_mean(x, groups, B=300, seed=3), abs=1e-12
    )


def test_cluster_resamples_keep_groups_whole():
    groups = np.array(["c"] * 3 + ["a"] * 1 + ["b"] * 4 + ["d"] * 2)
    rs = stats.Resampler(len(groups), B=50, seed=12345, groups=groups)
    W = rs.weights()
    for g in np.unique(groups):
        cols = W[:, groups == g]
        assert np.all(cols == cols[:, :1])  # every row of a group has the group's multiplicity
    for idx in rs.row_indices():
        picked = groups[idx]
        for g in np.unique(picked):
            assert (picked == g).sum() % (groups == g).sum() == 0
    # Group multiplicities sum to the number of groups in every resample.
    assert np.all(W[:, [0, 3, 4, 8]].sum(axis=1) == 4)


def test_results_do_not_depend_on_chunking(monkeypatch):
    """Resamples are drawn in memory-bounded chunks; chunking must not change them."""
    import carebench.stats.bootstrap as bs

    x = np.random.default_rng(0).normal(size=50)
    W_one = stats.Resampler(50, 101, 4).weights()
    ci_one = stats.bootstrap_mean_ci(x, B=101, seed=4)
    y, P = _data(S=2, n=50)
    m_one = stats.bootstrap_metric_samples(y, P, 4, ["qwk"], B=101, seed=4)["qwk"]
    monkeypatch.setattr(bs, "_CHUNK_CELLS", 50 * 7)  # force chunks of 7 resamples
    rs = stats.Resampler(50, 101, 4)
    assert rs.chunk == 7
    np.testing.assert_array_equal(rs.weights(), W_one)
    assert np.all(W_one.sum(axis=1) == 50)
    assert stats.bootstrap_mean_ci(x, B=101, seed=4) == ci_one
    m_chunked = stats.bootstrap_metric_samples(y, P, 4, ["qwk"], B=101, seed=4)["qwk"]
    np.testing.assert_array_equal(m_chunked, m_one)


def test_identical_systems_paired():
    rng = np.random.default_rng(5)
    a = rng.random(300)
    res = stats.paired_bootstrap(a, a.copy())
    assert res.diff == 0 and res.ci[0] <= 0 <= res.ci[1] and res.p_improve == 0.5
    assert not res.separated and res.seed == 12345
    y, P = _data(S=1, n=300)
    m = stats.paired_metric_bootstrap(y, P[0], P[0].copy(), 4, "macro_f1")
    assert m.ci[0] <= 0 <= m.ci[1] and m.p_improve == 0.5


def test_exchangeable_systems_are_rarely_separated():
    """Pairs of systems drawn from the same process: the paired 95% test should call
    about 5% of them separated. 300 pairs -> binomial SD 0.0126; accept [0.01, 0.10].
    p_improve should centre on 0.5."""
    rng = np.random.default_rng(21)
    separated, p_imp = [], []
    for r in range(300):
        y = rng.integers(0, 4, 200)
        pa = np.where(rng.random(200) < 0.6, y, rng.integers(0, 4, 200))
        pb = np.where(rng.random(200) < 0.6, y, rng.integers(0, 4, 200))
        res = stats.paired_metric_bootstrap(y, pa, pb, 4, "accuracy", B=500, seed=r)
        separated.append(res.separated)
        p_imp.append(res.p_improve)
    assert 0.01 <= np.mean(separated) <= 0.10, np.mean(separated)
    assert abs(np.mean(p_imp) - 0.5) < 0.05  # SD of a p_improve mean over 300 pairs is ~0.017


def test_clearly_better_system_is_separated_and_oriented():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 4, 400)
    good = np.where(rng.random(400) < 0.9, y, rng.integers(0, 4, 400))
    bad = rng.integers(0, 4, 400)
    acc = stats.paired_metric_bootstrap(y, good, bad, 4, "accuracy")
    assert acc.ci[0] > 0 and acc.p_improve > 0.99 and acc.separated
    mae = stats.paired_metric_bootstrap(y, good, bad, 4, "mae")
    assert mae.ci[1] < 0 and mae.p_improve > 0.99  # lower MAE is the improvement
    scores = stats.paired_bootstrap((good == y).astype(float), (bad == y).astype(float))
    assert scores.diff == pytest.approx(np.mean(good == y) - np.mean(bad == y))
    assert scores.ci[0] > 0 and scores.p_improve == 1.0


def test_paired_stat_callable_matches_vectorized_metric():
    y, P = _data(S=2, n=150, seed=3)

    def stat(pred, idx):
        return stats.macro_f1(y[idx], pred[idx], 4)

    loop = stats.paired_bootstrap(P[0], P[1], B=200, seed=6, stat=stat)
    vec = stats.paired_metric_bootstrap(y, P[0], P[1], 4, "macro_f1", B=200, seed=6)
    assert loop.diff == pytest.approx(vec.diff)
    assert loop.ci == pytest.approx(vec.ci)
    assert loop.p_improve == pytest.approx(vec.p_improve)


def test_paired_cluster_bootstrap_resamples_whole_groups():
    """With equal-sized groups, resampling groups of items is the same as resampling the
    groups' mean differences as single units (an identity independent of the code); an
    item-level bootstrap, which ignores the within-group correlation, is narrower."""
    rng = np.random.default_rng(4)
    groups = np.repeat(np.arange(30), 4)
    shift = rng.normal(size=30)[groups]  # a difference shared inside each group
    a = shift + 0.1 * rng.normal(size=120)
    b = 0.1 * rng.normal(size=120)
    res = stats.paired_bootstrap(a, b, groups=groups, B=500, seed=8)
    unit_a = a.reshape(30, 4).mean(axis=1)
    unit_b = b.reshape(30, 4).mean(axis=1)
    ref = stats.paired_bootstrap(unit_a, unit_b, B=500, seed=8)
    assert res.diff == pytest.approx(np.mean(a - b), abs=1e-12)
    assert res.ci == pytest.approx(ref.ci, abs=1e-12)
    items = stats.paired_bootstrap(a, b, B=500, seed=8)
    assert (res.ci[1] - res.ci[0]) > 1.5 * (items.ci[1] - items.ci[0])


def test_nan_resamples_are_left_out():
    # Two items, one class each: resamples that draw one item twice make kappa undefined.
    res = stats.bootstrap_metrics([0, 1, 1, 0], [0, 1, 1, 0], 2, names=["kappa"], B=200)
    assert res["kappa"]["value"] == 1.0 and res["kappa"]["ci"] == (1.0, 1.0)


def test_many_rows_at_once_give_each_row_its_own_interval_bit_for_bit():
    """Intervals of many rows in one call (the fast path for thousands of slice intervals)
    equal ``np.nanpercentile`` row by row, to the last bit: metrics.json must not change."""
    from carebench.stats.bootstrap import percentile_interval

    rng = np.random.default_rng(4)
    x = rng.normal(size=(60, 301)) * 10.0 ** rng.integers(-4, 4, size=(60, 1))
    x[3, ::7] = np.nan  # a few undefined resamples
    x[5] = np.nan  # none defined
    x[8] = np.round(x[8], 1)  # ties
    x[9] = 0.25  # constant
    for alpha in (0.05, 0.1, 0.01):
        lo, hi = percentile_interval(x, alpha)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = np.array([np.nanpercentile(row, [100 * alpha / 2, 100 * (1 - alpha / 2)]) for row in x])
        assert lo.tobytes() == ref[:, 0].tobytes() and hi.tobytes() == ref[:, 1].tobytes()
        lo3, hi3 = percentile_interval(x.reshape(3, 20, 301), alpha)  # any leading shape
        assert lo3.shape == (3, 20) and lo3.ravel().tobytes() == lo.tobytes() and hi3.ravel().tobytes() == hi.tobytes()
    lo, hi = percentile_interval(x)
    one_lo, one_hi = percentile_interval(x[0])  # one row: the plain np.nanpercentile route
    assert (float(one_lo), float(one_hi)) == (float(lo[0]), float(hi[0]))
    assert np.isnan(lo[5]) and np.isnan(hi[5])


@pytest.mark.parametrize(
    "call",
    [
        lambda: stats.bootstrap_metrics([], [], 4),
        lambda: stats.bootstrap_metrics([0, 1], [0, 1], 4, B=0),
        lambda: stats.bootstrap_metrics([0, 1], [0, 1], 4, alpha=1.5),
        lambda: stats.bootstrap_metrics([0, 1], [[0, 1, 1]], 4),
        lambda: stats.paired_bootstrap([1.0, 2.0], [1.0]),
        lambda: stats.bootstrap_mean_ci([]),
        lambda: stats.cluster_bootstrap_mean([1.0, 2.0], [0]),
        lambda: stats.paired_metric_bootstrap([0, 1], [0, 1], [1, 0], 4, "bleu"),
    ],
)
def test_bad_inputs(call):
    with pytest.raises(ValueError):
        call()
