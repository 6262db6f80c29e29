"""Detection, weighted severity and precision at an alert budget, checked by hand.

The data set is written out here: 40 items in two strata with known inclusion
probabilities (a crisis stratum sampled at 1/2, a general-traffic stratum at 1/50 that
holds the negatives). Every figure is recomputed below in plain Python from the
formulas of docs/risk.md, without carebench's functions.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    cohen_kappa_score,
    f1_score,
    mean_absolute_error,
    roc_auc_score,
)

from carebench.risk.scoring import score_records
from carebench.stats.operating import detection_metrics, precision_at_budget
from carebench.stats.stratified import weighted_metric_bootstrap

NEG = None  # a negative item's gold level
# (stratum, inclusion probability, gold level or NEG, predicted level)
CRISIS = [(0, 0), (0, 0), (0, 1), (0, 0), (0, 2),
          (1, 1), (1, 0), (1, 1), (1, 2), (1, 1),
          (2, 2), (2, 3), (2, 1), (2, 2), (2, 2),
          (3, 3), (3, 3), (3, 2), (3, 3), (3, 1)]
GENERAL = [(1, 1), (0, 0), (2, 1), (1, 0),
           *[(NEG, 0)] * 12, (NEG, 1), (NEG, 1), (NEG, 1), (NEG, 2)]
ITEMS = [("crisis", 0.5, g, p) for g, p in CRISIS] + [("general", 0.02, g, p) for g, p in GENERAL]


def _records() -> list[dict]:
    out = []
    for i, (stratum, incl, gold, pred) in enumerate(ITEMS):
        r = {"item_id": f"i{i:02d}", "method": "m", "gold": gold, "pred": pred, "status": "ok",
             "group": None, "model": None, "probs": None, "detail": {}, "stratum": stratum,
             "weight": 1 / incl, "usage": {}, "cost_usd": 0.0, "n_calls": 0, "latency_s": 0.0}
        if gold is NEG:
            r["negative"] = True
        out.append(r)
    return out


def test_the_data_set_is_forty_items_in_two_strata():
    assert len(ITEMS) == 40
    assert {s for s, *_ in ITEMS} == {"crisis", "general"}


@pytest.fixture(scope="module")
def metrics():
    return score_records(_records(), B=200, seed=7, priors=[0.01], budgets=[0.05, 0.2],
                         population="the illustrative population of this test")


def _weighted_f1(pairs, cls):
    tp = sum(w for w, y, p in pairs if y == cls and p == cls)
    fp = sum(w for w, y, p in pairs if y != cls and p == cls)
    fn = sum(w for w, y, p in pairs if y == cls and p != cls)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def test_weighted_severity_metrics_equal_the_formulas(metrics):
    pairs = [(1 / incl, g, p) for _, incl, g, p in ITEMS if g is not NEG]
    total = sum(w for w, _, _ in pairs)
    m = metrics["methods"]["m"]
    assert metrics["n"] == 24 and metrics["n_negative"] == 16
    assert m["accuracy"]["value"] == pytest.approx(sum(w for w, y, p in pairs if y == p) / total, abs=1e-12)
    assert m["mae"]["value"] == pytest.approx(sum(w * abs(y - p) for w, y, p in pairs) / total, abs=1e-12)
    assert m["macro_f1"]["value"] == pytest.approx(sum(_weighted_f1(pairs, c) for c in range(4)) / 4, abs=1e-12)
    high = [(w, int(y >= 2), int(p >= 2)) for w, y, p in pairs]
    assert m["high_risk_f1"]["value"] == pytest.approx(_weighted_f1(high, 1), abs=1e-12)
    # quadratic-weighted kappa from the weighted confusion matrix
    obs = [[sum(w for w, y, p in pairs if y == a and p == b) / total for b in range(4)] for a in range(4)]
    row = [sum(obs[a]) for a in range(4)]
    col = [sum(obs[a][b] for a in range(4)) for b in range(4)]
    dis = lambda a, b: (a - b) ** 2 / 9
    num = sum(dis(a, b) * obs[a][b] for a in range(4) for b in range(4))
    den = sum(dis(a, b) * row[a] * col[b] for a in range(4) for b in range(4))
    assert m["qwk"]["value"] == pytest.approx(1 - num / den, abs=1e-12)
    st = metrics["settings"]
    assert "macro_f1" in st["weighted_metrics"] and st["resampling"] == "within strata"
    assert st["population"] == "the illustrative population of this test"


def test_detection_equals_the_formulas(metrics):
    rows = [(1 / incl, g is not NEG, p) for _, incl, g, p in ITEMS]
    pos = [(w, s) for w, y, s in rows if y]
    neg = [(w, s) for w, y, s in rows if not y]
    wp, wn = sum(w for w, _ in pos), sum(w for w, _ in neg)
    auc = sum(a * b * (1.0 if s > t else 0.5 if s == t else 0.0) for a, s in pos for b, t in neg) / (wp * wn)
    det = metrics["deployment"]["methods"]["m"]["detection"]
    assert det["auroc"]["value"] == pytest.approx(auc, abs=1e-12)
    # the method's own flag: a predicted level of Ideation or above
    assert det["sensitivity"]["value"] == pytest.approx(sum(w for w, s in pos if s >= 1) / wp, abs=1e-12)
    assert det["specificity"]["value"] == pytest.approx(sum(w for w, s in neg if s < 1) / wn, abs=1e-12)
    # average precision: sum over score levels (highest first) of recall step x precision
    ap, prev_recall = 0.0, 0.0
    for t in sorted({s for _, _, s in rows}, reverse=True):
        tp = sum(w for w, s in pos if s >= t)
        fp = sum(w for w, s in neg if s >= t)
        ap += (tp / wp - prev_recall) * tp / (tp + fp)
        prev_recall = tp / wp
    assert det["auprc"]["value"] == pytest.approx(ap, abs=1e-12)


def _hand_budget(prior: float, budget: float, low: int):
    """t_b, boundary share q, precision@b and recall@b written out from the formulas."""
    rows = [(1 / incl, g is not NEG and g >= low, p) for _, incl, g, p in ITEMS]
    wp = sum(w for w, y, _ in rows if y)
    wn = sum(w for w, y, _ in rows if not y)
    levels = sorted({s for *_, s in rows}, reverse=True)
    tpr = lambda t: sum(w for w, y, s in rows if y and s >= t) / wp
    fpr = lambda t: sum(w for w, y, s in rows if not y and s >= t) / wn
    rate = lambda t: prior * tpr(t) + (1 - prior) * fpr(t)
    inside = [t for t in levels if rate(t) <= budget]
    t_b = min(inside) if inside else None
    a_b, tpr_b, fpr_b = (rate(t_b), tpr(t_b), fpr(t_b)) if t_b is not None else (0.0, 0.0, 0.0)
    nxt = max(t for t in levels if t_b is None or t < t_b)
    q = (budget - a_b) / (rate(nxt) - a_b)
    recall = tpr_b + q * (tpr(nxt) - tpr_b)
    fp_rate = fpr_b + q * (fpr(nxt) - fpr_b)
    precision = prior * recall / (prior * recall + (1 - prior) * fp_rate)
    # the same precision by reweighting the sample: positives pi/pi_s, negatives (1-pi)/(1-pi_s)
    pi_s = wp / (wp + wn)
    up, un = prior / pi_s, (1 - prior) / (1 - pi_s)

    def alerted(y: bool) -> float:
        whole = sum(w for w, yy, s in rows if yy == y and t_b is not None and s >= t_b)
        part = sum(w for w, yy, s in rows if yy == y and s == nxt)
        return whole + q * part
    reweighted = up * alerted(True) / (up * alerted(True) + un * alerted(False))
    return {"t_b": t_b, "q": q, "precision": precision, "recall": recall, "reweighted": reweighted,
            "alerts": prior * recall + (1 - prior) * fp_rate, "fpr": fp_rate}


def test_net_benefit_equals_its_formula():
    rows = [(1 / incl, g is not NEG and g >= 2, p) for _, incl, g, p in ITEMS]
    res = precision_at_budget([p for *_, p in rows], [y for _, y, _ in rows], [0.01], [0.05],
                              [w for w, *_ in rows], [s for s, *_ in ITEMS], B=20, net_benefit_pt=0.1)[0]
    hand = _hand_budget(0.01, 0.05, 2)
    expected = 0.01 * hand["recall"] - 0.99 * hand["fpr"] * 0.1 / 0.9
    assert res["net_benefit"]["value"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("cut,low", [("ideation", 1), ("behavior", 2), ("attempt", 3)])
@pytest.mark.parametrize("budget", [0.05, 0.2])
def test_precision_at_budget_equals_the_formulas(metrics, cut, low, budget):
    hand = _hand_budget(0.01, budget, low)
    got = next(p for p in metrics["deployment"]["methods"]["m"]["budget"][cut] if p["budget"] == budget)
    assert got["threshold"] == hand["t_b"]
    assert got["boundary_share"] == pytest.approx(hand["q"], abs=1e-12)
    assert got["precision"]["value"] == pytest.approx(hand["precision"], abs=1e-12)
    assert got["precision"]["value"] == pytest.approx(hand["reweighted"], abs=1e-12)
    assert got["recall"]["value"] == pytest.approx(hand["recall"], abs=1e-12)
    assert got["alerts_per_10k"]["value"] == pytest.approx(1e4 * budget, abs=1e-9)
    assert hand["alerts"] == pytest.approx(budget, abs=1e-12)  # the expected alert rate fills the budget
    assert got["number_needed_to_evaluate"]["value"] == pytest.approx(1 / hand["precision"], abs=1e-9)
    lo, hi = got["precision"]["ci"]
    assert lo <= got["precision"]["value"] <= hi


def test_the_budget_is_solved_again_in_every_resample(metrics):
    """The interval is not the point's spread alone: a resample's own t_b differs."""
    got = metrics["deployment"]["methods"]["m"]["budget"]["behavior"][0]
    assert got["recall"]["ci"][0] < got["recall"]["ci"][1]


def test_without_weight_columns_the_weighted_path_is_scikit_learn():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 80)
    p = np.clip(y + rng.integers(-1, 2, 80), 0, 3)
    res = weighted_metric_bootstrap(y, p, 4, np.ones(80), np.zeros(80), B=50, seed=1)
    assert res["accuracy"]["value"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
    assert res["macro_f1"]["value"] == pytest.approx(f1_score(y, p, average="macro"), abs=1e-12)
    assert res["weighted_f1"]["value"] == pytest.approx(f1_score(y, p, average="weighted"), abs=1e-12)
    assert res["qwk"]["value"] == pytest.approx(cohen_kappa_score(y, p, weights="quadratic"), abs=1e-12)
    assert res["mae"]["value"] == pytest.approx(mean_absolute_error(y, p), abs=1e-12)
    score = rng.random(80)
    det = detection_metrics(score, y >= 2, p >= 2, B=50)
    assert det["auroc"]["value"] == pytest.approx(roc_auc_score(y >= 2, score), abs=1e-12)
    assert det["auprc"]["value"] == pytest.approx(average_precision_score(y >= 2, score), abs=1e-12)
    w = rng.random(80) + 0.2  # and with weights, scikit-learn's sample_weight
    det = detection_metrics(score, y >= 2, p >= 2, w, B=50)
    assert det["auroc"]["value"] == pytest.approx(roc_auc_score(y >= 2, score, sample_weight=w), abs=1e-12)
    assert det["auprc"]["value"] == pytest.approx(
        average_precision_score(y >= 2, score, sample_weight=w), abs=1e-12)


def test_all_weights_one_gives_the_unweighted_point_values():
    base = [dict(r, weight=None, stratum=None) for r in _records() if r["gold"] is not None]
    for r in base:
        r.pop("weight"), r.pop("stratum")
    plain = score_records(base, B=50, seed=1)
    ones = score_records([dict(r, weight=1.0) for r in base], B=50, seed=1)
    assert "deployment" not in plain and "weighted_metrics" not in plain["settings"]
    for k in ("accuracy", "macro_f1", "qwk", "mae", "high_risk_f1"):
        assert ones["methods"]["m"][k]["value"] == plain["methods"]["m"][k]["value"]


def test_discrete_ties_are_split_in_expectation_not_drawn():
    """Scoring twice with other seeds moves intervals, never the point figures."""
    a = score_records(_records(), B=50, seed=1, priors=[0.01], budgets=[0.05])
    b = score_records(_records(), B=50, seed=2, priors=[0.01], budgets=[0.05])
    pa = a["deployment"]["methods"]["m"]["budget"]["behavior"][0]
    pb = b["deployment"]["methods"]["m"]["budget"]["behavior"][0]
    assert pa["precision"]["value"] == pb["precision"]["value"]
    assert 0 < pa["boundary_share"] < 1  # the budget cuts through a tied level here


def test_the_report_shows_detection_and_severity_apart(metrics):
    from carebench.risk.report import build_risk_report, risk_headline

    recs = _records()
    manifest = {"dataset": {"name": "hand", "source": "test"}, "methods": [{"name": "m", "method": "m"}]}
    report = build_risk_report(json.loads(json.dumps(metrics)), recs, manifest)
    titles = [s.title for s in report.sections]
    assert "Detection (suicide-related vs negative)" in titles and "Precision at an alert budget" in titles
    box = risk_headline(metrics, recs, manifest)
    labels = [k for k, _ in box.rows]
    assert labels == ["Severity", "Detection"]
    assert math.isfinite(metrics["deployment"]["methods"]["m"]["detection"]["auroc"]["value"])


# ----------------------------------------------------------------------------- data columns


def _write(tmp_path, rows, name="d.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def test_design_columns_are_read_and_absent_means_weight_one(tmp_path):
    from carebench.risk.data import load_dataset

    rows = [{"id": "a", "text": "x", "level": "Ideation", "stratum": "s1", "inclusion_probability": 0.25},
            {"id": "b", "text": "y", "level": "negative", "stratum": "s2", "inclusion_probability": 0.01}]
    data = load_dataset(_write(tmp_path, rows))
    assert [it.weight for it in data.items] == [4.0, 100.0]
    assert [it.negative for it in data.items] == [False, True]
    assert data.label_counts["negative"] == 1
    assert data.describe()["design"]["strata"] == {"s1": 1, "s2": 1}
    plain = load_dataset(_write(tmp_path, [{"id": "a", "text": "x", "level": 1}], "p.jsonl"))
    assert plain.items[0].weight is None and "design" not in plain.describe()
    assert "negative" not in plain.label_counts


@pytest.mark.parametrize("rows,expected", [
    ([{"id": "a", "text": "x", "level": 1, "stratum": "s"}, {"id": "b", "text": "y", "level": 2}],
     "1 of 2 items have a stratum and the others do not (first without: item 'b')"),
    ([{"id": "a", "text": "x", "level": 1, "weight": 3}, {"id": "b", "text": "y", "level": 2}],
     "1 of 2 items have an inclusion_probability or weight and the others do not"),
    ([{"id": "a", "text": "x", "level": 1, "weight": 3, "inclusion_probability": 0.5}],
     "give inclusion_probability or weight, not both"),
    ([{"id": "a", "text": "x", "level": 1, "inclusion_probability": 1.5}], "inclusion_probability"),
])
def test_mixed_or_bad_design_columns_are_refused_in_one_line(tmp_path, capsys, rows, expected):
    from carebench.cli import main

    path = _write(tmp_path, rows)
    rc = main(["risk", "run", "--data", str(path), "--method", "tfidf-lr", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and expected in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_prior_out_of_range_is_one_line(tmp_path, capsys):
    from carebench.cli import main

    rc = main(["risk", "run", "--data", "builtin:sample", "--method", "tfidf-lr", "--prior", "1.5",
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == "carebench: error: --prior must lie in (0, 1), got 1.5"


def test_each_method_kind_has_its_risk_score():
    from carebench.risk.deployment import risk_score, score_kind

    probs = [0.1, 0.2, 0.3, 0.4]
    fitted = {"status": "ok", "pred": 3, "probs": probs, "model": None, "detail": {"fold": 0}}
    llm = {"status": "ok", "pred": 3, "probs": probs, "model": "openai:m", "detail": {}}
    moderation = {"status": "ok", "pred": 1, "probs": None, "model": None,
                  "detail": {"signal": 0.37, "thresholds": [0.1, 0.35, 0.7]}}
    discrete = {"status": "ok", "pred": 2, "probs": None, "model": "openai:m", "detail": {}}
    assert risk_score(fitted) == pytest.approx(0.3 + 0.4)  # P(Behavior or Attempt)
    assert risk_score(llm) == pytest.approx(0 * 0.1 + 1 * 0.2 + 2 * 0.3 + 3 * 0.4)  # expected level
    assert risk_score(moderation) == 0.37
    assert risk_score(discrete) == 2.0
    assert score_kind([fitted]) == "predicted probability of Behavior or Attempt"
    assert score_kind([llm]).startswith("expected level")
    assert score_kind([discrete]).startswith("answered level")
