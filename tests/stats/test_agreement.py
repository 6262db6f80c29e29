"""Agreement coefficients against published worked examples and naive re-derivations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from carebench import stats

nan = np.nan

# Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
# Published: P-bar = 0.378, P_e = 0.213, kappa = 0.210.
WIKI_FLEISS = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]

# Gwet, Handbook of Inter-Rater Reliability, 4th ed. (2014), p. 120: 4 raters, 12 units,
# categories 1..5, missing ratings (as distributed in Gwet's irrCAC package, `cac.raw4raters`).
# Published: pa = 0.818, AC1 pe = 0.190, AC1 = 0.775; Fleiss pe = 0.239, kappa = 0.761.
GWET_RAW4 = np.array(
    [
        [1, 1, nan, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [nan, 5, 5, 5],
        [nan, nan, 1, 1],
        [nan, nan, 3, nan],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers,
# 12 units, values 1..5 with missing data. Published: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPP_2011 = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)

# Wikipedia, "Krippendorff's alpha", computational example: 3 coders, 15 units.
# Published: nominal alpha = 0.691; interval alpha = 0.811.
WIKI_KRIPP = np.array(
    [
        [nan, nan, nan, nan, nan, 3, 4, 1, 2, 1, 1, 3, 3, nan, 3],
        [1, nan, 2, 1, 3, 3, 4, 3, nan, nan, nan, nan, nan, nan, nan],
        [nan, nan, 2, 1, 3, 4, 4, nan, 2, 1, 1, 3, 3, nan, 4],
    ]
)


def test_fleiss_wikipedia_example():
    assert stats.fleiss_kappa(WIKI_FLEISS) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_gwet_handbook_example_with_missing_ratings():
    counts = stats.ratings_to_counts(GWET_RAW4 - 1, k=5)
    assert stats.fleiss_kappa(counts, varying_raters=True) == pytest.approx(0.761, abs=5e-4)
    assert stats.fleiss_kappa(ratings=GWET_RAW4 - 1, k=5) == pytest.approx(0.761, abs=5e-4)
    assert stats.percent_agreement(GWET_RAW4 - 1) == pytest.approx(0.818, abs=5e-4)


def _fleiss_1971(counts: np.ndarray) -> float:
    """Fleiss (1971) formulas written out with loops, complete data only."""
    N, k = counts.shape
    n = counts[0].sum()
    P_i = [(sum(c * c for c in row) - n) / (n * (n - 1)) for row in counts]
    p_j = [sum(counts[i][j] for i in range(N)) / (N * n) for j in range(k)]
    P_bar = sum(P_i) / N
    P_e = sum(p * p for p in p_j)
    return (P_bar - P_e) / (1 - P_e)


@pytest.mark.parametrize("seed", range(20))
def test_fleiss_matches_textbook_formula_on_random_complete_data(seed):
    rng = np.random.default_rng(seed)
    k, raters, n_items = int(rng.integers(2, 6)), int(rng.integers(2, 8)), int(rng.integers(3, 40))
    ratings = rng.choice(k, size=(n_items, raters), p=rng.dirichlet(np.ones(k)))
    counts = stats.ratings_to_counts(ratings, k)
    assert stats.fleiss_kappa(counts) == pytest.approx(_fleiss_1971(counts), abs=1e-12)


def test_gwet_ac1_handbook_four_raters_missing():
    assert stats.gwet_ac1(GWET_RAW4 - 1, k=5) == pytest.approx(0.775, abs=5e-4)
    # Same thing from counts; negative values also mean "missing".
    raw = np.where(np.isnan(GWET_RAW4), -1, GWET_RAW4 - 1).astype(int)
    assert stats.gwet_ac1(raw, k=5) == pytest.approx(0.775, abs=5e-4)
    assert stats.gwet_ac1(counts=stats.ratings_to_counts(raw, 5)) == pytest.approx(0.775, abs=5e-4)


def _from_table(table: np.ndarray) -> np.ndarray:
    rows = [
        (i, j)
        for i in range(table.shape[0])
        for j in range(table.shape[1])
        for _ in range(table[i, j])
    ]
    return np.array(rows)


def test_gwet_ac1_two_raters_handbook_table():
    """Gwet (2014) Handbook: 100 pregnant women classified by 2 abstractors into 3 types
    (irrCAC `cont3x3abstractors`); published AC1 = 0.849."""
    table = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    assert stats.gwet_ac1(_from_table(table), k=3) == pytest.approx(0.849, abs=5e-4)


def test_gwet_ac1_binary_two_raters_hand_worked():
    # 10 items: 6 both-yes, 1 + 1 split, 2 both-no. pa = 0.8; pi_yes = (12+1+1)/20 = 0.7;
    # pe = 0.7*0.3 + 0.3*0.7 = 0.42; AC1 = (0.8-0.42)/0.58. Cohen: pe = 0.7^2+0.3^2 = 0.58.
    r = _from_table(np.array([[2, 1], [1, 6]]))
    assert stats.gwet_ac1(r, k=2) == pytest.approx(0.38 / 0.58, abs=1e-12)
    assert stats.cohen_kappa(r[:, 0], r[:, 1], 2) == pytest.approx(0.22 / 0.42, abs=1e-12)


def test_ac1_resists_the_kappa_paradox_on_skewed_criteria():
    """90 both-met, 5+5 split, 0 both-not-met: kappa < 0 though raters agree 90%, AC1 = 0.8895."""
    r = _from_table(np.array([[0, 5], [5, 90]]))
    assert stats.cohen_kappa(r[:, 0], r[:, 1], 2) == pytest.approx((0.9 - 0.905) / 0.095, abs=1e-12)
    assert stats.gwet_ac1(r, k=2) == pytest.approx((0.9 - 0.095) / 0.905, abs=1e-12)
    assert stats.percent_agreement(r) == pytest.approx(0.9)


def test_gwet_ac1_many_raters_binary_hand_worked():
    # 3 raters, 4 items. Item agreement: (1,1,1)->1, (1,1,0)->1/3, (0,0,0)->1, (1,0,0)->1/3.
    # pa = (1 + 1/3 + 1 + 1/3)/4 = 2/3; pi_1 = (1 + 2/3 + 0 + 1/3)/4 = 0.5; pe = 0.5.
    r = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0], [1, 0, 0]])
    assert stats.gwet_ac1(r, k=2) == pytest.approx((2 / 3 - 0.5) / 0.5, abs=1e-12)


@pytest.mark.parametrize(
    "level, published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)]
)
def test_krippendorff_2011_example_with_missing_data(level, published):
    assert stats.krippendorff_alpha(KRIPP_2011, level) == pytest.approx(published, abs=5e-4)


def test_krippendorff_wikipedia_example():
    assert stats.krippendorff_alpha(WIKI_KRIPP, "nominal") == pytest.approx(0.691, abs=5e-4)
    assert stats.krippendorff_alpha(WIKI_KRIPP, "interval") == pytest.approx(0.811, abs=5e-4)


def _alpha_by_pairs(data: np.ndarray, level: str) -> float:
    """Krippendorff's definition by explicit enumeration of pairable value pairs."""
    units = [[v for v in data[:, u] if not np.isnan(v)] for u in range(data.shape[1])]
    units = [u for u in units if len(u) >= 2]
    pool = [v for u in units for v in u]
    n = len(pool)
    values = sorted(set(pool))
    n_v = {v: pool.count(v) for v in values}

    def delta(a: float, b: float) -> float:
        if level == "nominal":
            return float(a != b)
        if level == "interval":
            return (a - b) ** 2
        lo, hi = min(a, b), max(a, b)
        between = sum(n_v[g] for g in values if lo <= g <= hi)
        return (between - (n_v[a] + n_v[b]) / 2) ** 2

    d_o = (
        sum(sum(delta(a, b) for a, b in itertools.permutations(u, 2)) / (len(u) - 1) for u in units)
        / n
    )
    d_e = sum(delta(a, b) for a, b in itertools.permutations(pool, 2)) / (n * (n - 1))
    return 1 - d_o / d_e


@pytest.mark.parametrize("seed", range(15))
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_krippendorff_matches_pair_enumeration_on_random_missing_data(seed, level):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 4, size=(int(rng.integers(2, 5)), int(rng.integers(4, 15)))).astype(
        float
    )
    data[rng.random(data.shape) < 0.3] = np.nan
    if not any((~np.isnan(data[:, u])).sum() >= 2 for u in range(data.shape[1])):
        data[:, 0] = 1.0
    expected = _alpha_by_pairs(data, level)
    assert stats.krippendorff_alpha(data, level) == pytest.approx(expected, abs=1e-10)


def test_krippendorff_package_cross_check_if_installed():
    kp = pytest.importorskip("krippendorff")
    for level in ("nominal", "ordinal", "interval"):
        ref = kp.alpha(reliability_data=KRIPP_2011, level_of_measurement=level)
        assert stats.krippendorff_alpha(KRIPP_2011, level) == pytest.approx(ref, abs=1e-9)


def test_two_rater_kappa_is_sklearn_symmetric():
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 4, 50), rng.integers(0, 4, 50)
    for w in (None, "linear", "quadratic"):
        assert stats.cohen_kappa(a, b, 4, w) == pytest.approx(
            cohen_kappa_score(a, b, weights=w, labels=range(4))
        )
        assert stats.cohen_kappa(a, b, 4, w) == pytest.approx(stats.cohen_kappa(b, a, 4, w))


def test_mean_pairwise_jaccard_hand_worked():
    rater_a = [{"refer", "validate"}, {"refer"}, set(), {"x"}]
    rater_b = [{"refer"}, {"refer"}, set(), None]
    rater_c = [{"validate"}, {"ask"}, set(), {"x"}]
    # item 0: J(ab)=1/2, J(ac)=1/2, J(bc)=0 -> 1/3; item 1: 1, 0, 0 -> 1/3;
    # item 2: all empty -> 1; item 3: only a and c rated, J = 1.
    assert stats.mean_pairwise_jaccard([rater_a, rater_b, rater_c]) == pytest.approx(
        (1 / 3 + 1 / 3 + 1 + 1) / 4
    )


def test_majority_and_rater_vs_consensus():
    r = np.array([[0, 0, 1], [1, 1, 1], [2, 2, 0], [0, 1, 2], [2, nan, 2]])
    np.testing.assert_array_equal(stats.majority_labels(r, 3), [0, 1, 2, -1, 2])
    np.testing.assert_array_equal(stats.majority_labels(r, 3, tie="high"), [0, 1, 2, 2, 2])
    np.testing.assert_array_equal(stats.majority_labels(r, 3, tie="low"), [0, 1, 2, 0, 2])
    got = stats.rater_vs_consensus_macro_f1(r, 3)
    for j in range(3):
        others = np.delete(r, j, axis=1)
        ref = stats.majority_labels(others, 3)
        ok = (ref >= 0) & ~np.isnan(r[:, j])
        expected = f1_score(
            ref[ok], r[ok, j].astype(int), average="macro", zero_division=0
        )
        assert got[j] == pytest.approx(expected)
    given = stats.rater_vs_consensus_macro_f1(r, 3, consensus=[0, 1, 2, 0, 2])
    assert given[0] == pytest.approx(1.0)


def test_degenerate_and_bad_inputs():
    assert np.isnan(stats.fleiss_kappa([[3, 0], [3, 0]]))  # everyone always says category 0
    assert np.isnan(stats.krippendorff_alpha([[1, 1], [1, 1]]))
    with pytest.raises(ValueError, match="two or more"):
        stats.fleiss_kappa([[1, 0], [0, 1]])
    with pytest.raises(ValueError, match="exactly one"):
        stats.gwet_ac1()
    with pytest.raises(ValueError, match="empty"):
        stats.gwet_ac1(np.zeros((0, 2)))
    with pytest.raises(ValueError, match="two or more values"):
        stats.krippendorff_alpha([[1, nan], [nan, 2]])
    with pytest.raises(ValueError, match="level"):
        stats.krippendorff_alpha(KRIPP_2011, "ratio")
