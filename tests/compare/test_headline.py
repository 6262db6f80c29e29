"""The compare and leaderboard headline boxes on hand-made metrics: the decision, the
numbers it rests on and the caveats a reader needs before trusting it."""

from __future__ import annotations

from carebench.compare.report import compare_headline, leaderboard_headline


def _compare(failed, banners, ci=(-0.05, 0.02), n=12):
    row = {"gated": True, "diff": -0.01, "ci": list(ci), "label": "macro-F1", "higher_is_better": True,
           "verdict": "not separable"}
    return {"gate": {"failed": failed}, "unit": "item", "banners": banners,
            "comparability": {"overridden": []},
            "pairs": [{"base": "llm", "candidate": "llm", "n_units": n, "rows": [
                {"gated": False, "diff": 0.3, "ci": [0.1, 0.5], "label": "QWK", "higher_is_better": True,
                 "verdict": "improvement"}, row]}]}


def test_a_passed_gate_on_flagged_runs_says_so():
    h = compare_headline(_compare([], ["illustrative data", "flagged results"]))
    assert h.verdict.startswith("Gate passed")
    assert (h.value.value, h.value.lo, h.value.hi, h.n) == (-0.01, -0.05, 0.02, 12)  # the gated row, not QWK
    assert any("flagged results" in c for c in h.caveats)
    assert any("small n: 12 items" in c for c in h.caveats)
    clean = compare_headline(_compare([{"label": "macro-F1", "pair": "llm -> llm"}], [], n=300))
    assert clean.verdict.startswith("Gate failed: 1 gated metric")
    assert clean.caveats == []


def test_a_collapsed_interval_is_a_caveat():
    h = compare_headline(_compare([], [], ci=(0.0, 0.0), n=100))
    assert [c for c in h.caveats if "collapsed to a point" in c]


def test_leaderboard_top_row_band_and_exclusions():
    m = {"unit": "task", "banners": [], "runs": [{"included": True}, {"included": False}],
         "boards": [{"label": "score", "n_common_units": 40, "rows": [
             {"system": "a@m1", "value": 0.8, "ci": [0.7, 0.9], "band": 1},
             {"system": "b@m2", "value": 0.75, "ci": [0.65, 0.85], "band": 1},
             {"system": "c@m3", "value": 0.5, "ci": [0.4, 0.6], "band": 2}]}]}
    h = leaderboard_headline(m)
    assert h.verdict == "Top system: a@m1" and h.n == 40 and h.value.value == 0.8
    assert h.caveats == ["not separable from (same band): b@m2", "1 run(s) excluded (see Runs)"]
