"""Analytic chance baseline against seeds/001 Table 2 and brute-force enumeration."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm

from carebench import stats

#: seeds/001 Table 2, row "Baseline Chance (uniform random)", label counts of the 516 posts
#: (Indicator 127, Ideation 54, Behavior 123, Attempt 212).
PAPER_COUNTS = [127, 54, 123, 212]
PAPER_ROW = {
    "accuracy": 0.250,
    "macro_f1": 0.238,
    "weighted_f1": 0.262,
    "qwk": 0.000,
    "mae": 1.329,
    "adjacent_accuracy": 0.586,
    "high_risk_f1": 0.565,
}


@pytest.mark.parametrize("method", ["expected_confusion", "expectation"])
def test_reproduces_seed_table2_chance_row_within_0001(method):
    got = stats.chance_baseline(PAPER_COUNTS, method=method)
    for name, printed in PAPER_ROW.items():
        assert abs(got[name] - printed) <= 0.001, (name, got[name], printed)


def test_default_definition_rounds_to_the_printed_row():
    """The table evaluates metrics on the expected confusion matrix: every entry rounds
    to the printed value, whereas the true expectation of macro-F1 (0.2373) would print
    as 0.237. This is how we know which definition the seed used.

    MAE is the exception: the exact 685.5/516 = 1.32849 rounds to 1.328, and the
    table's 1.329 comes from rounding twice (1.32849 -> 1.3285 -> 1.329).
    """
    got = stats.chance_baseline(PAPER_COUNTS)
    for name, printed in PAPER_ROW.items():
        if name != "mae":
            assert f"{got[name]:.3f}" == f"{printed:.3f}", name
    assert f"{round(got['mae'], 4):.4f}" == "1.3285"
    exact = stats.chance_baseline(PAPER_COUNTS, method="expectation")
    assert f"{exact['macro_f1']:.3f}" == "0.237"


def test_hand_worked_values():
    got = stats.chance_baseline(PAPER_COUNTS)
    N = 516
    # MAE: a uniform guess is off by (0+1+2+3)/4 = 1.5 steps from the end levels and
    # (1+0+1+2)/4 = 1 step from the middle ones: (127*1.5 + 54 + 123 + 212*1.5) / 516.
    assert got["mae"] == pytest.approx(685.5 / 516, abs=1e-12)
    assert got["mae"] == pytest.approx(1.3284883720930232, abs=1e-12)
    # Adjacent accuracy: 2 of 4 levels are within one step of an end level, 3 of 4 of a middle one.
    assert got["adjacent_accuracy"] == pytest.approx(
        (127 * 2 + 54 * 3 + 123 * 3 + 212 * 2) / (4 * N)
    )
    # Plug-in F1 of class c: precision n_c/N, recall 1/4.
    p = np.array(PAPER_COUNTS) / N
    f1 = 2 * p * 0.25 / (p + 0.25)
    assert got["macro_f1"] == pytest.approx(f1.mean(), abs=1e-12)
    assert got["weighted_f1"] == pytest.approx((p * f1).sum(), abs=1e-12)
    hp = 335 / N
    assert got["high_risk_f1"] == pytest.approx(2 * hp * 0.5 / (hp + 0.5), abs=1e-12)
    assert got["accuracy"] == 0.25 and got["qwk"] == 0.0
    # Under-triage: level t is under-called with probability t/4.
    assert got["under_triage"] == pytest.approx((54 * 1 + 123 * 2 + 212 * 3) / (4 * N))
    assert got["over_triage"] == pytest.approx((127 * 3 + 54 * 2 + 123 * 1) / (4 * N))


def _all_predictions(n: int, k: int) -> np.ndarray:
    """Every prediction vector of length n over k labels: shape (k**n, n)."""
    return np.array(list(itertools.product(range(k), repeat=n)))


def _enumerate(counts: list[int], k: int) -> dict[str, float]:
    """Average of each metric over all k^N equally likely prediction vectors.

    Metrics are computed per vector straight from their definitions with numpy
    (no carebench code), and a sample of vectors is checked against scikit-learn.
    """
    y = np.repeat(np.arange(len(counts)), counts)
    P = _all_predictions(len(y), k)  # (V, N)
    Y = np.broadcast_to(y, P.shape)
    cm = np.einsum("nt,vnp->vtp", np.eye(k)[y], np.eye(k)[P])  # (V, k, k)
    tp = np.einsum("vii->vi", cm)
    support, predicted = cm.sum(2), cm.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(support + predicted > 0, 2 * tp / (support + predicted), 0.0)
        hp, hy = P >= k // 2, Y >= k // 2
        htp = (hp & hy).sum(1)
        hden = hp.sum(1) + hy.sum(1)
        hr = np.where(hden > 0, 2 * htp / hden, 0.0)
        w = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2
        expected = support[:, :, None] * predicted[:, None, :] / len(y)
        den = (w * expected).sum((1, 2))
        qwk = 1 - (w * cm).sum((1, 2)) / den
    per_vector = {
        "accuracy": (P == Y).mean(1),
        "macro_f1": f1.mean(1),
        "weighted_f1": (f1 * support).sum(1) / len(y),
        "mae": np.abs(P - Y).mean(1),
        "adjacent_accuracy": (np.abs(P - Y) <= 1).mean(1),
        "high_risk_f1": hr,
        "under_triage": (P < Y).mean(1),
        "over_triage": (P > Y).mean(1),
        "qwk": qwk[den > 0],  # kappa is undefined when den == 0; average where defined
    }
    # Tie the per-vector definitions to scikit-learn on a sample of vectors.
    labels = list(range(k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for v in np.random.default_rng(0).choice(len(P), size=min(40, len(P)), replace=False):
            p = P[v]
            assert per_vector["macro_f1"][v] == pytest.approx(
                skm.f1_score(y, p, labels=labels, average="macro", zero_division=0)
            )
            assert per_vector["weighted_f1"][v] == pytest.approx(
                skm.f1_score(y, p, labels=labels, average="weighted", zero_division=0)
            )
            assert hr[v] == pytest.approx(skm.f1_score(y >= k // 2, p >= k // 2, zero_division=0))
            ref_q = skm.cohen_kappa_score(y, p, labels=labels, weights="quadratic")
            np.testing.assert_allclose(qwk[v], ref_q, atol=1e-12, equal_nan=True)
    return {name: float(v.mean()) for name, v in per_vector.items()}


@pytest.mark.parametrize("counts", [[2, 1, 0, 3], [1, 1, 1, 1], [4, 0, 0, 2], [3, 2, 2], [5, 1]])
def test_expectation_equals_brute_force_average(counts):
    """Exact E[metric] over all k^N equally likely prediction vectors."""
    k = len(counts)
    ref = _enumerate(counts, k)
    got = stats.chance_baseline(counts, method="expectation")
    for name in ref:
        assert got[name] == pytest.approx(ref[name], abs=1e-12), name
    # And the plug-in definition genuinely differs for F1 on such small samples.
    plug = stats.chance_baseline(counts)
    assert plug["macro_f1"] != pytest.approx(ref["macro_f1"], abs=1e-6)


def test_expected_f1_matches_double_binomial_sum():
    """O(N) form vs the direct sum over independent TP ~ Bin(n_c, q), FP ~ Bin(N-n_c, q)."""
    from scipy.stats import binom

    for n_c, N, q in [(54, 516, 0.25), (335, 516, 0.5), (7, 30, 1 / 3)]:
        tp = np.arange(n_c + 1)[:, None]
        fp = np.arange(N - n_c + 1)[None, :]
        P = binom.pmf(tp, n_c, q) * binom.pmf(fp, N - n_c, q)
        direct = np.sum(P * 2 * tp / (n_c + tp + fp))
        assert stats.expected_f1(n_c, N, q) == pytest.approx(direct, abs=1e-12)


def test_expected_confusion_rows_spread_evenly():
    cm = stats.expected_confusion([4, 8])
    np.testing.assert_allclose(cm, [[2, 2], [4, 4]])


@pytest.mark.parametrize("bad", [[], [5], [3, -1], [0, 0, 0], [1.5, 2]])
def test_bad_counts(bad):
    with pytest.raises(ValueError):
        stats.chance_baseline(bad)
