"""Supported-label macro-F1 against scikit-learn and a hand-worked case."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from carebench import stats


def _sklearn_supported(t: np.ndarray, p: np.ndarray) -> float:
    supported = np.flatnonzero(t.sum(axis=0) > 0)
    return f1_score(t, p, average="macro", labels=supported, zero_division=0)


def test_hand_worked():
    # labels A, B, C (C never in gold). A: tp 1, fp 1, fn 0 -> F1 2/3. B: tp 0, fn 1 -> 0.
    t = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0]])
    p = np.array([[1, 0, 1], [0, 0, 1], [1, 0, 0]])
    assert stats.supported_label_macro_f1(t, p) == pytest.approx((2 / 3 + 0) / 2, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_matches_sklearn_on_random_multilabel(seed):
    rng = np.random.default_rng(seed)
    n, L = rng.integers(5, 40), rng.integers(3, 20)
    t = (rng.random((n, L)) < rng.uniform(0.05, 0.5)).astype(int)
    t[:, 0] = 0  # an unsupported label
    p = (rng.random((n, L)) < 0.3).astype(int)
    assert stats.supported_label_macro_f1(t, p) == pytest.approx(_sklearn_supported(t, p), abs=1e-12)
    # equivalently: per-label binary F1 averaged over supported labels
    per = [f1_score(t[:, j], p[:, j], zero_division=0) for j in range(L) if t[:, j].any()]
    assert stats.supported_label_macro_f1(t, p) == pytest.approx(np.mean(per), abs=1e-12)


def test_resampled_matches_sklearn_per_resample():
    rng = np.random.default_rng(3)
    t = (rng.random((25, 8)) < 0.25).astype(int)
    p = (rng.random((25, 8)) < 0.3).astype(int)
    rs = stats.Resampler(25, B=50, seed=12345)
    got = stats.supported_label_macro_f1_resampled(t, p, rs.weights())
    want = [_sklearn_supported(t[idx], p[idx]) for idx in rs.row_indices()]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_no_support_is_nan_and_bad_input_raises():
    z = np.zeros((3, 2), int)
    assert np.isnan(stats.supported_label_macro_f1(z, z))
    with pytest.raises(stats.StatsError):
        stats.supported_label_macro_f1(z, np.zeros((3, 3), int))
    with pytest.raises(stats.StatsError):
        stats.supported_label_macro_f1(z + 2, z)
