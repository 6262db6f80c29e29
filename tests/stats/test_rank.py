"""Leaderboard rank stability."""

from __future__ import annotations

import numpy as np
import pytest

from carebench import stats


def test_spearman_matches_the_no_ties_formula():
    # rho = 1 - 6 sum d^2 / (n (n^2 - 1)); ranks differ by one swap of 2 and 3.
    a = [0.9, 0.8, 0.7, 0.6, 0.5]
    b = [0.9, 0.7, 0.8, 0.6, 0.5]
    assert stats.spearman_rho(a, b) == pytest.approx(1 - 6 * 2 / (5 * 24))
    assert stats.spearman_rho(a, a[::-1]) == pytest.approx(-1.0)  # fully reversed ranking
    assert stats.spearman_rho(a, [50, 40, 30, 20, 10]) == pytest.approx(1.0)  # scale-free


def test_spearman_ties_use_average_ranks():
    # Pearson correlation of average ranks [1.5,1.5,3] and [1,2,3].
    r1, r2 = np.array([1.5, 1.5, 3]), np.array([1, 2, 3])
    expected = np.corrcoef(r1, r2)[0, 1]
    assert stats.spearman_rho([1, 1, 2], [1, 2, 3]) == pytest.approx(expected)


def test_mappings_align_by_system_name():
    primary = {"m1": 0.88, "m2": 0.80, "m3": 0.71, "m4": 0.70}
    loo = {"m4": 0.72, "m3": 0.69, "m2": 0.79, "m1": 0.86}  # m3 and m4 swap
    assert stats.spearman_rho(primary, loo) == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert stats.rank_shifts(primary, loo) == {"m1": 0, "m2": 0, "m3": 1, "m4": -1}
    with pytest.raises(ValueError, match="different systems"):
        stats.spearman_rho(primary, {"m1": 1.0, "m2": 0.5})


def test_pairwise_matrix_of_replicates():
    runs = [{"a": 3, "b": 2, "c": 1}, {"a": 3, "b": 1, "c": 2}, {"a": 1, "b": 2, "c": 3}]
    m = stats.pairwise_spearman(runs)
    assert m.shape == (3, 3) and np.allclose(np.diag(m), 1)
    assert m[0, 1] == pytest.approx(0.5) and m[0, 2] == pytest.approx(-1.0) and m[1, 0] == m[0, 1]


def test_degenerate():
    assert np.isnan(stats.spearman_rho([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        stats.spearman_rho([1], [1])


def test_ranks_and_rho_equal_scipy_on_tied_and_untied_data():
    # an independent reference: scipy.stats (carebench computes these with numpy)
    from scipy.stats import rankdata, spearmanr

    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 25, 200):
        for ties in (False, True):
            x = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
            y = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
            if np.ptp(x) == 0 or np.ptp(y) == 0:
                continue
            assert np.array_equal(stats.ranks(x, higher_is_better=False), rankdata(x, method="average"))
            assert np.array_equal(stats.ranks(x), rankdata(-x, method="average"))
            assert stats.spearman_rho(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)


def test_a_missing_score_gives_no_rank_as_in_scipy():
    from scipy.stats import rankdata

    assert np.isnan(stats.spearman_rho([1.0, np.nan, 3.0], [1.0, 2.0, 3.0]))
    assert np.isnan(stats.ranks(np.array([1.0, np.nan, 3.0]))).all()
    assert np.isnan(rankdata([1.0, np.nan, 3.0], nan_policy="propagate")).all()
