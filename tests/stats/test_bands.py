"""Band structure (seeds/002 §4.1, E.1): adjacent gaps tested by paired bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from carebench import stats


def _tiered_scores(n=300, seed=0):
    """Three tiers far apart (0.85, 0.55, 0.25); two identical systems per tier."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0, 0.05, n)
    scores = {}
    for tier, level in zip("ABC", (0.85, 0.55, 0.25), strict=True):
        base = np.clip(level + difficulty + rng.normal(0, 0.1, n), 0, 1)
        scores[f"{tier}1"] = base
        scores[f"{tier}2"] = base.copy()
    return scores


def _noise(n: int, mean: float, sd: float, seed: int) -> np.ndarray:
    """Noise with an exact sample mean and SD, so a gap's z-score is fixed by design."""
    z = np.random.default_rng(seed).normal(size=n)
    return mean + sd * (z - z.mean()) / z.std()


def test_separated_tiers_form_separate_bands_and_identical_systems_share_one():
    result = stats.bands(_tiered_scores())
    assert [sorted(b.members) for b in result] == [["A1", "A2"], ["B1", "B2"], ["C1", "C2"]]
    assert [b.gap_below is not None for b in result] == [True, True, False]
    assert all(b.gap_below.separated for b in result[:-1])
    for b in result:
        assert len(b.gaps_within) == 1 and not b.gaps_within[0].separated
        assert b.gaps_within[0].result.p_improve == 0.5
        assert b.lo_score == b.hi_score
    assert result[0].hi_score > result[1].hi_score > result[2].hi_score
    gaps = stats.all_gaps(result)
    assert len(gaps) == 5 and sum(g.separated for g in gaps) == 2


def test_each_gap_equals_a_pairwise_paired_bootstrap():
    scores = _tiered_scores(n=120, seed=3)
    # Within noise of B1: mean gap 0.002 with SE 0.05/sqrt(120) = 0.0046 (0.44 SE).
    scores["B3"] = scores["B1"] + _noise(120, 0.002, 0.05, seed=4)
    result = stats.bands(scores, B=500, seed=7)
    for gap in stats.all_gaps(result):
        ref = stats.paired_bootstrap(scores[gap.upper], scores[gap.lower], B=500, seed=7)
        assert gap.result.diff == pytest.approx(ref.diff)
        assert gap.result.ci == pytest.approx(ref.ci)
        assert gap.result.p_improve == pytest.approx(ref.p_improve)
    members = [b.members for b in result]
    assert members[1][0] == "B3" and set(members[1]) == {"B1", "B2", "B3"}


def test_band_is_a_maximal_run_of_unseparated_gaps():
    """a > b > c where a-b and b-c are each 0.7 SE (not separated) but a-c is a constant
    0.01 (separated): bands follow adjacent gaps only, so all three share one band."""
    n, m, sd = 200, 0.005, 0.1  # SE of each adjacent gap = 0.1/sqrt(200) = 0.0071
    b = np.random.default_rng(1).normal(0.5, 0.2, n)
    z = _noise(n, 0.0, sd, seed=2)
    scores = {"a": b + m + z, "b": b, "c": b - (m - z)}
    result = stats.bands(scores)
    assert len(result) == 1 and result[0].members == ["a", "b", "c"]
    assert stats.paired_bootstrap(scores["a"], scores["c"]).separated


def test_single_system_and_ordering_ties():
    assert [b.members for b in stats.bands({"only": np.ones(5)})] == [["only"]]
    tie = stats.bands({"z": np.ones(4), "m": np.ones(4)})
    assert tie[0].members == ["m", "z"]  # equal scores: ordered by name


def test_metric_bands_for_classifiers():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 500)

    def system(p_correct):
        return np.where(rng.random(500) < p_correct, y, rng.integers(0, 4, 500))

    strong, weak = system(0.9), system(0.3)
    preds = {"strong": strong, "strong_copy": strong.copy(), "weak": weak}
    result = stats.metric_bands(y, preds, 4, "macro_f1")
    assert [sorted(b.members) for b in result] == [["strong", "strong_copy"], ["weak"]]
    # Lower-is-better metrics rank ascending.
    by_mae = stats.metric_bands(y, preds, 4, "mae")
    assert "weak" in by_mae[-1].members


def test_bad_inputs():
    with pytest.raises(ValueError):
        stats.bands({})
    with pytest.raises(ValueError):
        stats.bands({"a": np.ones(3), "b": np.ones(4)})
