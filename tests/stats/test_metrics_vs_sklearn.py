"""Every metric scikit-learn also computes must equal scikit-learn's.

240 generated cases: k from 2 to 6, n from 1 to 80, balanced and heavily
unbalanced label distributions, classes missing from the truth, from the
predictions or from both, constant predictors and perfect predictors.
scikit-learn is the independent reference (used in tests only).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

from carebench import stats

N_CASES = 240


def _case(i: int) -> tuple[np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(1000 + i)
    k = int(rng.integers(2, 7))
    n = int(rng.integers(1, 81))
    kind = i % 6
    # Class probabilities: uniform, Dirichlet-skewed, or with classes removed.
    p_true = rng.dirichlet(np.full(k, 0.3 if kind in (1, 4) else 3.0))
    p_pred = rng.dirichlet(np.full(k, 0.3 if kind in (2, 4) else 3.0))
    if kind == 3:  # some classes never occur in the truth
        drop = rng.choice(k, size=int(rng.integers(1, k)), replace=False)
        p_true[drop] = 0
        p_true /= p_true.sum()
    y_true = rng.choice(k, size=n, p=p_true)
    if kind == 5:  # constant predictor
        y_pred = np.full(n, int(rng.integers(0, k)))
    elif i % 11 == 0:  # perfect predictor
        y_pred = y_true.copy()
    else:
        # Mix of noisy copies (so agreement is non-trivial) and independent draws.
        noisy = np.clip(y_true + rng.integers(-1, 2, size=n), 0, k - 1)
        y_pred = np.where(rng.random(n) < 0.5, noisy, rng.choice(k, size=n, p=p_pred))
    return y_true, y_pred, k


CASES = [_case(i) for i in range(N_CASES)]


def test_cases_cover_the_degenerate_shapes():
    """The generator really produces missing-class, unbalanced and tiny cases."""
    missing_true = sum(len(np.unique(t)) < k for t, _, k in CASES)
    missing_pred = sum(len(np.unique(p)) < k for _, p, k in CASES)
    tiny = sum(len(t) <= 3 for t, _, _ in CASES)
    unbalanced = sum(
        np.bincount(t, minlength=k).max() >= 0.7 * len(t) for t, _, k in CASES if len(t) >= 10
    )
    assert len(CASES) >= 200
    assert missing_true >= 50 and missing_pred >= 50 and tiny >= 3 and unbalanced >= 20


@pytest.mark.parametrize("i", range(N_CASES))
def test_matches_sklearn(i: int):
    y_true, y_pred, k = CASES[i]
    labels = list(range(k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm_ref = skm.confusion_matrix(y_true, y_pred, labels=labels)
        p_ref, r_ref, f_ref, s_ref = skm.precision_recall_fscore_support(
            y_true, y_pred, labels=labels, zero_division=0
        )
        ref = {
            "accuracy": skm.accuracy_score(y_true, y_pred),
            "macro_f1": skm.f1_score(
                y_true, y_pred, average="macro", zero_division=0
            ),
            "weighted_f1": skm.f1_score(
                y_true, y_pred, labels=labels, average="weighted", zero_division=0
            ),
            "qwk": skm.cohen_kappa_score(y_true, y_pred, labels=labels, weights="quadratic"),
            "mae": skm.mean_absolute_error(y_true, y_pred),
            "high_risk_f1": skm.f1_score(y_true >= k // 2, y_pred >= k // 2, zero_division=0),
        }
        kappas = {
            w: skm.cohen_kappa_score(y_true, y_pred, labels=labels, weights=w)
            for w in (None, "linear", "quadratic")
        }
        norm_ref = skm.confusion_matrix(y_true, y_pred, labels=labels, normalize="true")

    cm = stats.confusion_matrix(y_true, y_pred, k)
    np.testing.assert_array_equal(cm, cm_ref)
    # sklearn leaves NaN rows for absent classes; ours are zeros by convention.
    np.testing.assert_allclose(stats.normalize_rows(cm), np.nan_to_num(norm_ref), atol=1e-12)

    p, r, f, s = stats.per_class_prf(y_true, y_pred, k)
    np.testing.assert_allclose(p, p_ref, atol=1e-12)
    np.testing.assert_allclose(r, r_ref, atol=1e-12)
    np.testing.assert_allclose(f, f_ref, atol=1e-12)
    np.testing.assert_array_equal(s, s_ref)

    got = stats.compute_metrics(y_true, y_pred, k)
    for name, expected in ref.items():
        np.testing.assert_allclose(got[name], expected, atol=1e-12, equal_nan=True, err_msg=name)
        fn = stats.RISK_METRICS[name]
        np.testing.assert_allclose(
            fn(y_true, y_pred, k), expected, atol=1e-12, equal_nan=True, err_msg=name
        )
    assert stats.accuracy(y_true, y_pred, k) == pytest.approx(ref["accuracy"], abs=1e-12)
    assert stats.macro_f1(y_true, y_pred, k) == pytest.approx(ref["macro_f1"], abs=1e-12)
    assert stats.weighted_f1(y_true, y_pred, k) == pytest.approx(ref["weighted_f1"], abs=1e-12)
    assert stats.high_risk_f1(y_true, y_pred, k) == pytest.approx(ref["high_risk_f1"], abs=1e-12)
    assert stats.mae(y_true, y_pred) == pytest.approx(ref["mae"], abs=1e-12)
    for w, expected in kappas.items():
        np.testing.assert_allclose(
            stats.cohen_kappa(y_true, y_pred, k, w), expected, atol=1e-12, equal_nan=True
        )
    np.testing.assert_allclose(
        stats.qwk(y_true, y_pred, k), kappas["quadratic"], atol=1e-12, equal_nan=True
    )

    # Metrics scikit-learn lacks, against their one-line definitions.
    d = y_pred - y_true
    assert got["adjacent_accuracy"] == pytest.approx(np.mean(np.abs(d) <= 1), abs=1e-12)
    assert got["under_triage"] == pytest.approx(np.mean(d < 0), abs=1e-12)
    assert got["over_triage"] == pytest.approx(np.mean(d > 0), abs=1e-12)
    assert stats.adjacent_accuracy(y_true, y_pred) == got["adjacent_accuracy"]
    assert stats.under_triage(y_true, y_pred) == got["under_triage"]
    assert stats.over_triage(y_true, y_pred) == got["over_triage"]


def test_risk_metric_keys_are_the_contract():
    assert list(stats.RISK_METRICS) == [
        "accuracy",
        "macro_f1",
        "weighted_f1",
        "qwk",
        "mae",
        "adjacent_accuracy",
        "high_risk_f1",
        "under_triage",
        "over_triage",
    ]


def test_high_risk_split_is_behavior_and_attempt_on_four_levels():
    # Truth Ideation(1) vs prediction Behavior(2) crosses the split; 0 vs 1 does not.
    assert stats.high_risk_f1([1, 2], [2, 2], 4) == pytest.approx(2 / 3)
    assert stats.high_risk_f1([0, 2], [1, 3], 4) == 1.0
    assert list(stats.high_risk_mask(4)) == [False, False, True, True]


def test_degenerate_conventions():
    # Never-predicted class: precision 0 (zero_division=0), not NaN.
    p, r, f, s = stats.per_class_prf([0, 1, 1], [1, 1, 1], 3)
    assert p[0] == 0 and r[0] == 0 and f[2] == 0 and s[2] == 0
    # Kappa of two identical constant raters is undefined -> NaN, like scikit-learn.
    assert np.isnan(stats.cohen_kappa([2, 2, 2], [2, 2, 2], 4))
    # A row for an absent class normalizes to zeros.
    assert stats.normalize_rows(stats.confusion_matrix([0, 0], [0, 1], 3))[2].tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: stats.accuracy([], [], 4), "empty"),
        (lambda: stats.macro_f1([0, 1], [0], 4), "2 items but y_pred has 1"),
        (lambda: stats.qwk([0, 4], [0, 1], 4), "0..3"),
        (lambda: stats.mae([0.5], [1]), "integer"),
        (lambda: stats.compute_metrics([0], [0], 4, names=["auroc"]), "unknown metric"),
        (lambda: stats.confusion_matrix([0], [0], 1), "k"),
    ],
)
def test_bad_inputs_raise_clear_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    with pytest.raises(stats.StatsError):
        call()
