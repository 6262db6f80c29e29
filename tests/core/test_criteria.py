"""The core criteria rule (carebench.criteria): the per-conversation reference score against
hand-worked values, and support's vectorised scorer checked against that reference."""

from __future__ import annotations

import numpy as np
import pytest

from carebench.criteria import Criterion, decide, earned, weighted_score

J = ["j1", "j2", "j3"]


def c(cid, w, negative=False, applicable=True, dim="recognition"):
    return Criterion(id=cid, text=cid, dimension=dim, weight=w, negative=negative, applicable=applicable)


def test_weighted_score_hand_cases():
    crit = [c("a", 10), c("b", 5), c("n", 4, negative=True), c("d", 1), c("x", 7, applicable=False)]
    dec = {"a": decide({"j1": True, "j2": True, "j3": False}, J),    # 2-1 met: +10
           "b": decide({"j1": True, "j2": None, "j3": False}, J),    # undecided: 0
           "n": decide({"j1": False, "j2": False, "j3": True}, J),   # negative, not met: +4
           "d": decide({"j1": False, "j2": False}, J),               # 2 of 3 not met (j3 missing): 0
           "x": decide({"j1": True, "j2": True, "j3": True}, J)}     # inapplicable: nowhere
    assert [dec[k].state for k in "abnd"] == ["met", "undecided", "not_met", "not_met"]
    assert weighted_score(crit, dec) == pytest.approx((10 + 4) / (10 + 5 + 4 + 1))
    # a negative criterion decided met earns nothing; undecided earns nothing for either polarity
    assert not earned(decide({"j1": True, "j2": True, "j3": True}, J), True)
    assert not earned(dec["b"], True) and not earned(dec["b"], False)
    # an empty conversation earns nothing; no applicable weight gives no score
    empty = {k: decide({}, J, empty=True) for k in "abnd"}
    assert weighted_score(crit, empty) == 0.0
    assert weighted_score([c("x", 7, applicable=False)], dec) is None


def test_support_vectorised_scorer_equals_the_core_reference():
    """Each conversation of support's scripted case: the vectorised ``score`` against
    ``weighted_score`` over ``decide`` applied cell by cell to the same verdicts."""
    from support.test_scoring import TASKS, scored, scripted_case

    sc = scored()
    resp, verdicts = scripted_case()
    crit = {t["id"]: [Criterion.model_validate(x) for x in t["criteria"]] for t in TASKS}
    empty = {(r.task_id, r.attempt) for r in resp if r.status == "empty"}
    ids = np.array(sc.tasks.ids)[sc.conv_task]
    atts = sc.attempts[sc.conv_attempt]
    checked = 0
    for k in range(len(sc.conv_score)):
        task, att = str(ids[k]), int(atts[k])
        votes: dict[str, dict[str, bool | None]] = {}
        for v in verdicts:
            if (v.task_id, v.attempt) == (task, att):
                votes.setdefault(v.criterion_id, {}).setdefault(v.judge, v.met if v.status == "ok" else None)
        dec = {x.id: decide(votes.get(x.id, {}), J, empty=(task, att) in empty) for x in crit[task]}
        assert float(sc.conv_score[k]) == pytest.approx(weighted_score(crit[task], dec)), (task, att)
        checked += 1
    assert checked == 5
