"""Review sample design and IPW review statistics on a scripted review set."""

from __future__ import annotations

import json

import pytest
from sklearn.metrics import cohen_kappa_score

from carebench.construct.review import ReviewSampleConfig, draw_sample, review_stats, sheet_rows
from carebench.construct.sources import Persona, Proxy, WorkRow
from carebench.types import CarebenchError

POP = {("chat", "m1"): 10, ("chat", "m2"): 20, ("search", "m1"): 30, ("search", "m2"): 40}


def _rows():
    rows = []
    for (ctx, rw), n in POP.items():
        for i in range(n):
            rows.append(WorkRow(id=f"{ctx}-{rw}-{i}", text=f"source {i}", source="forum" if i % 2 else "dataset",
                                context=ctx, rewriter=rw, output=f"rewrite {ctx} number {i}",
                                persona=Persona(id="p", text="a persona"),
                                proxy=Proxy(intent=["INTENT_1" if i % 3 else "INTENT_3"])))
    return rows


def test_design_and_blind_sheets():
    rows = _rows()
    cfg = ReviewSampleConfig(total=8, per_reviewer=5, shared=2, reviewers=("ann", "bob"), seed=3)
    key, design = draw_sample(rows, cfg)
    assert len(key) == 8 and design["cells"] == {"chat|m1": 2, "chat|m2": 2, "search|m1": 2, "search|m2": 2}
    weights = {k["cell"]: k["weight"] for k in key}
    assert weights == {"chat|m1": 5.0, "chat|m2": 10.0, "search|m1": 15.0, "search|m2": 20.0}
    assert design["per_reviewer"] == {"ann": 5, "bob": 5}
    assert sum(k["shared"] for k in key) == 2
    shared_cells = {k["cell"] for k in key if k["shared"]}
    assert len(shared_cells) == 2  # interleaved: the shared block spans cells
    by_id = {r.id: r for r in rows}
    sheet = sheet_rows(key, by_id, "ann")
    assert len(sheet) == 5
    blob = json.dumps(sheet)
    assert "m1" not in blob and "m2" not in blob and "rewriter" not in blob
    key2, _ = draw_sample(rows, cfg)
    assert key2 == key  # seeded


def test_design_must_add_up():
    with pytest.raises(CarebenchError, match="does not add up"):
        draw_sample(_rows(), ReviewSampleConfig(total=10, per_reviewer=5, shared=2))


def _review(item, who, sev=True, leak=True, fmt=True, score=4):
    return {"item_id": item, "reviewer": who, "severity_preserved": sev, "no_leakage": leak, "format_ok": fmt,
            "factual": score, "persona_fit": score, "style": score, "context_fit": score, "naturalness": score}


def test_stats_hand_worked():
    key = [
        {"item_id": "A", "cell": "c1", "weight": 1.0, "reviewers": ["ann", "bob"]},
        {"item_id": "B", "cell": "c1", "weight": 1.0, "reviewers": ["ann"]},
        {"item_id": "C", "cell": "c2", "weight": 3.0, "reviewers": ["bob"]},
        {"item_id": "D", "cell": "c2", "weight": 3.0, "reviewers": ["ann", "bob"]},
    ]
    reviews = [
        _review("A", "ann", sev=True, score=5), _review("A", "bob", sev=False, score=3),  # shared: fails, mean 4
        _review("B", "ann", score=2),
        _review("C", "bob", sev=False, score=5),
        _review("D", "ann", score=4), _review("D", "bob", score=4),
    ]
    out = review_stats(key, reviews, B=200, seed=1)
    # severity failures: A (w 1) and C (w 3) of total weight 8 -> 4/8
    assert out["estimates"]["fail_severity"]["estimate"] == pytest.approx(0.5)
    # factual: (4*1 + 2*1 + 5*3 + 4*3) / 8 = 33/8
    assert out["estimates"]["factual"]["estimate"] == pytest.approx(33 / 8)
    assert out["estimates"]["fail_leakage"]["estimate"] == 0.0
    assert out["agreement"]["shared_items"] == 2
    ann = [1, 1]  # A: sev yes; D: yes
    bob = [0, 1]
    assert out["agreement"]["kappa_severity"] == pytest.approx(cohen_kappa_score(ann, bob))
    a_f, b_f = [5 - 1, 4 - 1], [3 - 1, 4 - 1]
    assert out["agreement"]["qwk_factual"] == pytest.approx(
        cohen_kappa_score(a_f, b_f, weights="quadratic", labels=[0, 1, 2, 3, 4]))
    assert out["missing_reviews"] == 0


def test_stats_reject_unassigned_reviews():
    key = [{"item_id": "A", "cell": "c", "weight": 1.0, "reviewers": ["ann"]}]
    with pytest.raises(CarebenchError, match="not assigned"):
        review_stats(key, [_review("A", "bob")])
    with pytest.raises(CarebenchError, match="not in the key"):
        review_stats(key, [_review("Z", "ann")])
