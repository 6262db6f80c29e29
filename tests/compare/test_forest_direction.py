"""Compare's forest plots say which side is better: every metric is drawn so that right of
the zero line means the candidate is better, a lower-is-better metric with its sign turned
(and marked), and the axis names both sides."""

from __future__ import annotations

import numpy as np
import pytest
from run_dirs import write_risk_run

import carebench.compare.report as compare_report_module
from carebench.compare.command import CompareConfig, compare_runs
from carebench.compare.report import compare_report
from carebench.report import Figure
from carebench.suites import comparer


@pytest.fixture
def risk_comparison(tmp_path):
    """A candidate that predicts every severe item one level lower: it under-triages more
    (a lower-is-better rate goes up) while accuracy goes down."""
    rng = np.random.default_rng(5)
    gold = {f"i{k:02d}": int(rng.integers(0, 4)) for k in range(40)}
    base = write_risk_run(tmp_path / "b", gold, {"clf": dict(gold)})
    worse = {i: (g - 1 if g >= 2 else g) for i, g in gold.items()}
    cand = write_risk_run(tmp_path / "c", gold, {"clf": worse})
    return compare_runs(CompareConfig(str(base), str(cand), B=200), comparer)


def test_forest_values_are_oriented_so_right_is_better(risk_comparison, monkeypatch):
    drawn = []

    def spy(labels, values, lows, highs, title, **kw):
        drawn.append((list(labels), list(values), list(lows), list(highs), kw))
        return b"\x89PNG\r\n\x1a\n" + b"0" * 16  # a stand-in PNG: only the inputs are looked at

    monkeypatch.setattr(compare_report_module, "dot_interval_chart", spy)
    report = compare_report(risk_comparison)
    rows = [r for p in risk_comparison["pairs"] for r in p["rows"] if r["diff"] is not None]
    per_pair = next(d for d in drawn if len(d[0]) == len(rows))
    labels, values, lows, highs, kw = per_pair
    assert kw["sides"] == ("candidate worse", "candidate better") and kw["reference"] == 0.0
    by_metric = {r["metric"]: k for k, r in enumerate(rows)}
    ut, acc = rows[by_metric["under_triage"]], rows[by_metric["accuracy"]]
    # hand-checked direction: the candidate under-triages more (diff > 0) and is less accurate (diff < 0)
    assert ut["diff"] > 0 and acc["diff"] < 0
    k = by_metric["under_triage"]
    assert values[k] == pytest.approx(-ut["diff"]) and values[k] < 0  # worse: left of zero
    assert (lows[k], highs[k]) == (pytest.approx(-ut["ci"][1]), pytest.approx(-ut["ci"][0]))
    assert labels[k].endswith("\u2193")
    j = by_metric["accuracy"]
    assert values[j] == pytest.approx(acc["diff"]) and values[j] < 0 and not labels[j].endswith("\u2193")
    assert (lows[j], highs[j]) == (pytest.approx(acc["ci"][0]), pytest.approx(acc["ci"][1]))
    captions = [b.caption for s in report.sections for b in s.blocks if isinstance(b, Figure)]
    assert captions and all("Right of the dotted line the candidate is better" in c for c in captions)


def test_forest_draws_with_the_cue(risk_comparison):
    figs = compare_report(risk_comparison).figures()
    assert figs and all(f.png.startswith(b"\x89PNG") for f in figs)
