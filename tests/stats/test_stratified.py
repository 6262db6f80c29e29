"""Weighted within-cell bootstrap against a hand-written loop and hand-worked weights."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.stats import StatsError, ipw_weights, weighted_cell_bootstrap, weighted_mean


def _loop_bootstrap(x, w, cells, B, seed):
    """The definition, one resample at a time: same draw order as documented."""
    rng = np.random.default_rng(seed)
    labels = sorted(set(cells))
    draws = {}
    for lab in labels:
        idx = [i for i, c in enumerate(cells) if c == lab]
        draws[lab] = (idx, rng.integers(0, len(idx), size=(B, len(idx))))
    out = []
    for b in range(B):
        num = den = 0.0
        for lab in labels:
            idx, d = draws[lab]
            for j in d[b]:
                i = idx[j]
                num += w[i] * x[i]
                den += w[i]
        out.append(num / den)
    return np.array(out)


def test_ipw_weights_hand_worked():
    cells = ["a", "a", "b", "b", "b", "c"]
    w = ipw_weights(cells, {"a": 10, "b": 3, "c": 7})
    assert w.tolist() == [5.0, 5.0, 1.0, 1.0, 1.0, 7.0]
    with pytest.raises(StatsError):
        ipw_weights(cells, {"a": 10, "b": 2, "c": 7})
    with pytest.raises(StatsError):
        ipw_weights(cells, {"a": 10, "b": 3})


def test_weighted_mean_hand_worked():
    # failures 1,0 in cell a (weight 5), 0,0,1 in b (weight 1), 1 in c (weight 7):
    # (5 + 0 + 0 + 0 + 1 + 7) / (5+5+1+1+1+7) = 13 / 20
    x = [1, 0, 0, 0, 1, 1]
    w = [5, 5, 1, 1, 1, 7]
    assert weighted_mean(x, w)[0] == pytest.approx(13 / 20)


def test_bootstrap_matches_loop():
    rng = np.random.default_rng(0)
    cells = [f"c{i % 4}" for i in range(23)]
    x = rng.integers(1, 6, size=23).astype(float)
    w = rng.uniform(0.5, 3.0, size=23)
    est = weighted_cell_bootstrap(x, w, cells, B=300, seed=7)
    ref = _loop_bootstrap(x.tolist(), w.tolist(), cells, 300, 7)
    np.testing.assert_allclose(est.samples[0], ref, rtol=1e-12)
    lo, hi = np.percentile(ref, [2.5, 97.5])
    assert est.lo[0] == pytest.approx(lo) and est.hi[0] == pytest.approx(hi)
    assert est.estimate[0] == pytest.approx(np.sum(w * x) / np.sum(w))


def test_bootstrap_keeps_cell_sizes():
    # a cell whose items are all 1 and a cell whose items are all 0 keep their weight
    # in every resample, so the estimate cannot move: interval collapses to the point
    cells = ["a"] * 3 + ["b"] * 5
    x = [1.0] * 3 + [0.0] * 5
    w = [2.0] * 3 + [1.0] * 5
    est = weighted_cell_bootstrap(x, w, cells, B=200, seed=1)
    assert est.lo[0] == pytest.approx(6 / 11) and est.hi[0] == pytest.approx(6 / 11)


def test_bootstrap_columns_and_nan():
    cells = ["a", "a", "b", "b"]
    x = np.array([[1.0, 4.0], [0.0, np.nan], [0.0, 2.0], [1.0, 3.0]])
    w = [1.0, 1.0, 2.0, 2.0]
    est = weighted_cell_bootstrap(x, w, cells, B=50, seed=3)
    assert est.estimate[0] == pytest.approx((1 + 0 + 0 + 2) / 6)
    assert est.estimate[1] == pytest.approx((4 + 4 + 6) / 5)  # the NaN rating is left out
    assert est.samples.shape == (2, 50)
