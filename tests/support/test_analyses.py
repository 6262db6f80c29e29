"""Analyses of the support suite on small hand-worked runs (seeds/002 §4, B.6, B.8, E.1-E.6)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from carebench.stats.bootstrap import bootstrap_mean_ci
from carebench.support.analyses import analyze
from carebench.support.records import ResponseRecord, VerdictRecord

J3 = ["j1", "j2", "j3"]


def crit(cid, dim, w):
    return {"id": cid, "text": cid, "dimension": dim, "weight": w}


def task(tid, crits, subcat="a", **meta):
    return {"id": tid, "subcategory": subcat, "metadata": meta, "criteria": crits}


def unanimous(outcomes, judges=J3):
    """Records where every judge agrees: outcomes[(responder, task, attempt)] = {criterion: met} or "EMPTY"."""
    resp, vs = [], []
    for (r, t, a), o in outcomes.items():
        if o == "EMPTY":
            resp.append(ResponseRecord(t, r, a, [], "", status="empty"))
            continue
        resp.append(ResponseRecord(t, r, a, [], "reply"))
        for cid, met in o.items():
            vs += [VerdictRecord(t, r, a, cid, j, met, "", "ok", "final") for j in judges]
    return resp, vs


TASKS = [
    task("R1", [crit("rec1", "recognition", 2), crit("rec2", "recognition", 2), crit("res1", "resources", 4),
                crit("dis1", "disclaimers", 2)], subcat="a", turn_structure="single", age_band="U18"),
    task("R2", [crit("rec1", "recognition", 1), crit("res1", "resources", 1), crit("res2", "resources", 2),
                crit("com1", "compassion", 1)], subcat="b", turn_structure="multi", age_band="O18"),
    task("R3", [crit("rec1", "recognition", 3), crit("com1", "compassion", 3), crit("dis1", "disclaimers", 4)],
         subcat="a", turn_structure="multi", age_band="U18"),
]
T, F = True, False
OUTCOMES = {
    ("M1", "R1", 0): {"rec1": T, "rec2": T, "res1": F, "dis1": T},
    ("M1", "R2", 0): {"rec1": T, "res1": T, "res2": T, "com1": F},
    ("M1", "R3", 0): {"rec1": T, "com1": T, "dis1": F},
    ("M2", "R1", 0): {"rec1": T, "rec2": F, "res1": T, "dis1": F},
    ("M2", "R2", 0): {"rec1": T, "res1": F, "res2": T, "com1": T},
    ("M2", "R3", 0): "EMPTY",
    ("M3", "R1", 0): {"rec1": T, "rec2": T, "res1": T, "dis1": T},
    ("M3", "R2", 0): {"rec1": F, "res1": T, "res2": T, "com1": T},
    ("M3", "R3", 0): {"rec1": T, "com1": T, "dis1": T},
}
for _t in TASKS:
    OUTCOMES[("reference", _t["id"], 0)] = {c["id"]: True for c in _t["criteria"]}


@pytest.fixture(scope="module")
def metrics():
    resp, vs = unanimous(OUTCOMES)
    return analyze(TASKS, resp, vs, B=200)


def test_scores_reference_and_full_satisfaction(metrics):
    m = metrics["models"]
    assert m["M1"]["score"] == pytest.approx((0.6 + 0.8 + 0.6) / 3)
    assert m["M2"]["score"] == pytest.approx((0.6 + 0.8 + 0.0) / 3)
    assert m["M3"]["score"] == pytest.approx((1.0 + 0.8 + 1.0) / 3)
    assert m["M3"]["full_satisfaction"] == pytest.approx(2 / 3)
    assert metrics["leaderboard"]["order"] == ["M3", "M1", "M2"]  # reference kept out
    assert metrics["reference"]["score"] == 1.0
    assert metrics["summary"]["median_score"] == pytest.approx(m["M1"]["score"])
    assert metrics["summary"]["median_model"] == "M1"
    json.dumps(metrics, allow_nan=False)  # strict JSON


def test_recognition_without_intervention(metrics):
    rwi = metrics["recognition_without_intervention"]
    # recognized: M1R1 (fails res1), M1R2, M2R2 (fails res1), M3R1; R3 carries no resources criterion
    assert rwi["pooled"]["recognized"] == 4 and rwi["pooled"]["failures"] == 2
    assert rwi["pooled"]["rate"] == pytest.approx(0.5)
    assert rwi["per_model"]["M1"]["rate"] == pytest.approx(0.5)
    assert rwi["per_model"]["M2"]["rate"] == pytest.approx(1.0)
    assert rwi["per_model"]["M3"]["rate"] == pytest.approx(0.0)
    assert rwi["per_model"]["reference"]["recognized"] == 2


def test_dimension_pass_rates_and_median_vs_best(metrics):
    d = metrics["dimensions"]
    rec = d["recognition"]
    assert rec["n_tasks"] == 3
    assert rec["pass_rate"]["M1"] == pytest.approx(1.0)
    assert rec["pass_rate"]["M2"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert rec["pass_rate"]["M3"] == pytest.approx(2 / 3)
    assert rec["median"] == pytest.approx(2 / 3) and rec["best"] == 1.0 and rec["best_model"] == "M1"
    assert rec["best_minus_median"] == pytest.approx(1 / 3)
    res = d["resources"]
    assert res["n_tasks"] == 2  # only tasks carrying the dimension
    assert res["pass_rate"]["M2"] == pytest.approx((1 + 2 / 3) / 2)
    assert res["criterion_pass_rate"]["M2"] == pytest.approx((1 + 1 / 2) / 2)  # unweighted
    assert res["median"] == pytest.approx(5 / 6) and res["best_model"] == "M3"
    assert d["disclaimers"]["pass_rate"]["M1"] == pytest.approx(0.5)
    assert d["disclaimers"]["median"] == pytest.approx(0.5)
    assert d["deescalation"]["n_tasks"] == 0 and d["deescalation"]["pass_rate"]["M1"] is None


def test_slices(metrics):
    ts = metrics["slices"]["turn_structure"]
    pooled = {"R1": (0.6 + 0.6 + 1) / 3, "R2": 0.8, "R3": (0.6 + 0 + 1) / 3}
    assert ts["values"]["single"]["pooled"] == pytest.approx(pooled["R1"])
    assert ts["values"]["multi"]["pooled"] == pytest.approx((pooled["R2"] + pooled["R3"]) / 2)
    assert ts["values"]["multi"]["per_model"]["M2"] == pytest.approx(0.4)
    assert ts["contrast"]["diff"] == pytest.approx((pooled["R2"] + pooled["R3"]) / 2 - pooled["R1"])
    sub = metrics["slices"]["subcategory"]["values"]
    assert sub["a"]["n_tasks"] == 2 and sub["a"]["pooled"] == pytest.approx((pooled["R1"] + pooled["R3"]) / 2)
    assert metrics["slices"]["age_band"]["values"]["O18"]["per_model"]["M1"] == pytest.approx(0.8)


def test_disclaimers_ablation(metrics):
    ab = metrics["disclaimers_ablation"]
    assert ab["scores"]["M1"] == pytest.approx((0.5 + 0.8 + 1.0) / 3)
    assert ab["scores"]["M2"] == pytest.approx((0.75 + 0.8 + 0) / 3)
    assert ab["delta"]["M3"] == pytest.approx(0.0)
    assert ab["delta"]["M1"] == pytest.approx((0.5 + 0.8 + 1.0) / 3 - 2 / 3)
    assert ab["order"] == ["M3", "M1", "M2"] and ab["order_unchanged"]


def test_non_response(metrics):
    nr = metrics["non_response"]
    assert nr["per_responder"]["M2"]["empty"] == 1 and nr["per_responder"]["M2"]["rate"] == pytest.approx(1 / 3)
    a = nr["by_subcategory"]["a"]
    assert a["per_responder"]["M2"]["rate"] == pytest.approx(0.5)
    assert a["pooled"]["empty"] == 1 and a["pooled"]["attempts"] == 6
    assert metrics["counts"]["conversations_empty"] == 1


def _binary_run(p_by_model, n_tasks, n_att, seed):
    """One criterion per task, unanimous verdicts: a conversation scores 1 (met) or 0."""
    rng = np.random.default_rng(seed)
    tasks = [task(f"t{i:03d}", [crit("c", "compassion", 1)]) for i in range(n_tasks)]
    met = {m: rng.random((n_tasks, n_att)) < p for m, p in p_by_model.items()}
    out = {(m, f"t{i:03d}", a): {"c": bool(met[m][i, a])} for m in met for i in range(n_tasks) for a in range(n_att)}
    resp, vs = unanimous(out)
    return tasks, resp, vs, met


def test_replicate_stability_matches_scipy():
    p = {"m1": 0.3, "m2": 0.45, "m3": 0.5, "m4": 0.55, "m5": 0.7}
    tasks, resp, vs, met = _binary_run(p, 30, 3, seed=3)
    rs = analyze(tasks, resp, vs, B=100)["replicate_stability"]
    names = sorted(p)
    per_att = {a: [met[m][:, a].mean() for m in names] for a in range(3)}
    for pair in rs["pairs"]:
        expect = spearmanr(per_att[pair["a"]], per_att[pair["b"]]).statistic
        assert pair["spearman_rho"] == pytest.approx(expect)
    assert rs["scores"]["1"]["m2"] == pytest.approx(met["m2"][:, 1].mean())
    assert len(rs["pairs"]) == 3


def test_bands_and_intervals():
    p = {"hi": 0.95, "mid": 0.5, "lo": 0.05}
    tasks, resp, vs, met = _binary_run(p, 80, 1, seed=5)
    # a twin of "mid" that differs on a single task cannot be separated from it
    twin = met["mid"].copy()
    twin[0, 0] = not twin[0, 0]
    r2, v2 = unanimous({("twin", f"t{i:03d}", 0): {"c": bool(twin[i, 0])} for i in range(80)})
    m = analyze(tasks, resp + r2, vs + v2, B=500)
    lb = m["leaderboard"]
    members = [sorted(b["members"]) for b in lb["bands"]]
    assert members == [["hi"], ["mid", "twin"], ["lo"]]
    assert lb["n_separated"] == 2 and lb["n_gaps"] == 3
    # the model interval is the task bootstrap of task scores (seed 12345)
    value, lo, hi = bootstrap_mean_ci(met["hi"][:, 0].astype(float), B=500, seed=12345)
    assert m["models"]["hi"]["score"] == pytest.approx(value)
    assert m["models"]["hi"]["ci"] == pytest.approx([lo, hi])
    row = lb["rows"][0]
    assert row["responder"] == "hi" and row["band"] == 1


def test_leave_one_judge_out_own_family():
    """Judge acme always credits its own family's model; the others split 1-1 on every task.

    Families by the default rule: provider + first model-name token (acme:sage-j ~ acme:sage-r)."""
    n = 40
    tasks = [task(f"t{i:02d}", [crit("c", "compassion", 1)]) for i in range(n)]
    judges = ["acme:sage-j", "beta:orb-j", "gamma:kite-j"]
    resp, vs = [], []
    for r in ("acme:sage-r", "beta:orb-r", "delta:lark-r"):
        for i in range(n):
            resp.append(ResponseRecord(f"t{i:02d}", r, 0, [], "x"))
            votes = {"acme:sage-j": True if r == "acme:sage-r" else i % 4 == 0,
                     "beta:orb-j": i % 2 == 0, "gamma:kite-j": i % 2 == 1}
            vs += [VerdictRecord(f"t{i:02d}", r, 0, "c", j, votes[j], "", "ok", "final") for j in judges]
    m = analyze(tasks, resp, vs, B=100)
    assert m["models"]["acme:sage-r"]["score"] == 1.0
    assert m["models"]["beta:orb-r"]["score"] == pytest.approx(0.25)
    loo = m["leave_one_judge_out"]
    drop = loo["drop"]["acme:sage-j"]
    assert drop["scores"]["acme:sage-r"] == 0.0  # beta+gamma never agree: unanimity rule
    assert drop["baseline"] == pytest.approx(-0.25)
    assert loo["drop"]["beta:orb-j"]["baseline"] == pytest.approx((-0.5 - 0.25) / 2)
    adv = loo["own_family"]["own_family_advantage"]
    assert adv["acme:sage-r"] == pytest.approx(0.75)
    assert adv["beta:orb-r"] == pytest.approx(0.25 - 0.375)
    assert adv["delta:lark-r"] == 0.0
    assert loo["leniency"]["acme:sage-j"] == pytest.approx((40 + 10 + 10) / 120)
    sp = m["self_preference"]
    assert sp["own_family"]["acme:sage-j"]["residual"] > 0.2
    assert sp["own_family"]["acme:sage-j"]["own_ranks_in_column"] == {"acme:sage-r": 1}


def test_rescore_is_deterministic_under_record_order():
    resp, vs = unanimous(OUTCOMES)
    a = analyze(TASKS, resp, vs, B=100)
    b = analyze(list(reversed(TASKS)), resp[::-1], vs[::-1], B=100)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_scope_sensitivity_when_both_scopes_recorded():
    resp, vs = unanimous(OUTCOMES)
    # credit-anywhere verdicts: everything met
    extra = [VerdictRecord(v.task_id, v.responder, v.attempt, v.criterion_id, v.judge, True, "", "ok", "anywhere")
             for v in vs]
    m = analyze(TASKS, resp, vs + extra, B=100)
    ss = m["scope_sensitivity"]
    judged = sum(len(o) for o in OUTCOMES.values() if o != "EMPTY")
    failed = sum(1 for o in OUTCOMES.values() if o != "EMPTY" for x in o.values() if not x)
    assert ss["share_credited_only_by_other"] == pytest.approx(failed / judged)
    assert m["models"]["M1"]["score"] == pytest.approx((0.6 + 0.8 + 0.6) / 3)  # primary scope untouched


def test_blank_latency_against_answered_turns():
    """E.6: latency of blank turns next to answered ones, per responder (medians by hand)."""
    tasks = [task("L1", [crit("c1", "recognition", 1)], turn_structure="multi")]

    def conv(a, lat, texts):
        turns = []
        for k, (lt, tx) in enumerate(zip(lat, texts, strict=True)):
            turns += [{"role": "user", "content": f"u{k}"},
                      {"role": "assistant", "content": tx, "status": "ok" if tx else "empty", "latency_s": lt}]
        return ResponseRecord("L1", "M", a, turns, texts[-1], "ok" if texts[-1] else "empty")

    resp = [conv(0, [0.2, 3.0], ["", "answer"]), conv(1, [0.4, 5.0], ["", "answer"]),
            conv(2, [4.0, 0.3], ["answer", ""])]
    lat = analyze(tasks, resp, [], B=10)["non_response"]["latency"]["M"]
    assert lat == {"blank_turns": 3, "answered_turns": 3, "median_blank_s": 0.3, "median_answered_s": 4.0}


def test_max_rank_shift_when_dropping_a_judge_reorders_models():
    """B.6: dropping a judge leaves a 2-judge panel that must agree. Model A wins every cell 2-1
    (j1 and j2 say met, j3 not), model B is unanimous except one criterion: with the full panel
    A ranks first; without j1 (or j2) A's cells are undecided and B moves up one place."""
    tasks = [task("K", [crit(f"c{i}", "recognition", 1) for i in range(4)])]
    resp = [ResponseRecord("K", "A", 0, [], "reply"), ResponseRecord("K", "B", 0, [], "reply")]
    vs = [VerdictRecord("K", "A", 0, f"c{i}", j, j != "j3", "", "ok", "final") for i in range(4) for j in J3]
    vs += [VerdictRecord("K", "B", 0, f"c{i}", j, i != 0, "", "ok", "final") for i in range(4) for j in J3]
    m = analyze(tasks, resp, vs, B=10)
    assert (m["models"]["A"]["score"], m["models"]["B"]["score"]) == (1.0, 0.75)
    drop = m["leave_one_judge_out"]["drop"]
    assert drop["j1"]["scores"] == {"A": 0.0, "B": 0.75} and drop["j1"]["max_rank_shift"] == 1
    assert drop["j2"]["max_rank_shift"] == 1 and drop["j1"]["top_unchanged"] is False
    assert drop["j3"]["max_rank_shift"] == 0 and drop["j3"]["scores"]["A"] == 1.0
