"""Statistics edge cases (issue 10, item 13), each against an independent reference."""

from fractions import Fraction

import numpy as np
import pytest
from sklearn.metrics import f1_score

from carebench import stats


def test_perfect_classifier_with_a_rare_class_has_macro_f1_interval_of_one():
    # one class at 2 of 100 items: ~13% of resamples draw neither of them
    y = np.array([0] * 49 + [1] * 49 + [2] * 2)
    res = stats.bootstrap_metrics(y, y.copy(), 3, names=["macro_f1"], B=2000, seed=42)
    assert res["macro_f1"]["value"] == 1.0
    assert res["macro_f1"]["ci"] == (1.0, 1.0)


def test_resample_macro_f1_averages_over_present_classes_like_sklearn():
    rng = np.random.default_rng(3)
    y = rng.choice(4, size=60, p=[0.45, 0.45, 0.07, 0.03])
    p = np.where(rng.random(60) < 0.8, y, rng.integers(0, 4, 60))
    B, seed = 80, 11
    got = stats.bootstrap_metric_samples(y, p, 4, names=["macro_f1"], B=B, seed=seed)["macro_f1"]
    absent = 0
    for b, idx in enumerate(stats.Resampler(len(y), B, seed).row_indices()):
        absent += len(np.union1d(y[idx], p[idx])) < 4
        ref = f1_score(y[idx], p[idx], average="macro", zero_division=0)  # sklearn: present labels
        assert got[b] == pytest.approx(ref, abs=1e-12)
    assert absent > 0  # the case under test really occurs


def _fleiss_exact(counts: list[list[int]]) -> Fraction:
    """Fleiss (1971) in exact rational arithmetic (no rounding to hide behind)."""
    n = sum(counts[0])
    N = len(counts)
    pa = sum(Fraction(sum(c * c for c in row) - n, n * (n - 1)) for row in counts) / N
    pj = [Fraction(sum(row[j] for row in counts), N * n) for j in range(len(counts[0]))]
    pe = sum(p * p for p in pj)
    return (pa - pe) / (1 - pe)


def test_fleiss_kappa_defined_for_a_large_sample_with_one_disagreement():
    counts = np.zeros((200_000, 2), int)
    counts[:, 0] = 2
    counts[0] = [1, 1]
    got = stats.fleiss_kappa(counts)
    ref = _fleiss_exact([[1, 1], *([[2, 0]] * 199_999)])
    assert not np.isnan(got)
    assert got == pytest.approx(float(ref), abs=1e-9)
    assert np.isnan(stats.fleiss_kappa([[2, 0]] * 5))  # truly one category: undefined


def test_fleiss_refuses_a_label_matrix_and_takes_it_as_ratings():
    labels = np.array([[0, 1, 1], [2, 2, 2], [0, 0, 1], [1, 1, 1], [3, 2, 2], [0, 0, 0]])
    with pytest.raises(ValueError, match="label matrix"):
        stats.fleiss_kappa(labels)
    counts = [[int((row == c).sum()) for c in range(4)] for row in labels]
    assert stats.fleiss_kappa(ratings=labels, k=4) == pytest.approx(
        float(_fleiss_exact(counts)), abs=1e-12
    )


def test_krippendorff_takes_nan_as_missing_and_refuses_negative_codes():
    # hand-worked: pairable units (0,0), (0,1), (1,1) -> coincidences [[2,1],[1,2]],
    # n_c = (3, 3), alpha = 1 - (n-1) * 2 / (3*3*2) = 1 - 5*2/18 = 4/9
    data = np.array([[0, 0, 1, 1], [0, 1, 1, np.nan]])
    assert stats.krippendorff_alpha(data) == pytest.approx(4 / 9, abs=1e-12)
    with pytest.raises(ValueError, match="NaN for missing"):
        stats.krippendorff_alpha(np.nan_to_num(data, nan=-1))
