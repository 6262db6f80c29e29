"""metrics.json: its shape, the failure policy worked by hand, exclusions, chance row."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import f1_score

from carebench.risk.scoring import METRIC_KEYS, score_records


def _rec(item, method, gold, pred, status="ok", group=None):
    return {"item_id": item, "method": method, "gold": gold, "pred": pred, "status": status,
            "group": group, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "latency_s": 0.0, "cost_usd": 0.0, "n_calls": 0}


GOLD = [0, 1, 2, 3]


def _records():
    a = [_rec("i0", "A", 0, 0), _rec("i1", "A", 1, None, "parse_error"), _rec("i2", "A", 2, 2),
         _rec("i3", "A", 3, None, "empty")]
    b = [_rec("i0", "B", 0, None, "excluded"), _rec("i1", "B", 1, 1), _rec("i2", "B", 2, 2),
         _rec("i3", "B", 3, 3)]
    return a + b


def test_metrics_json_shape():
    m = score_records(_records(), B=50)
    assert m["n"] == 4
    assert m["label_counts"] == {"Indicator": 1, "Ideation": 1, "Behavior": 1, "Attempt": 1}
    assert set(m["chance"]) == set(METRIC_KEYS)
    assert set(METRIC_KEYS) == {"accuracy", "macro_f1", "weighted_f1", "qwk", "mae",
                                "adjacent_accuracy", "high_risk_f1", "under_triage", "over_triage"}
    for e in m["methods"].values():
        for k in METRIC_KEYS:
            assert set(e[k]) == {"value", "ci"} and len(e[k]["ci"]) == 2
        assert len(e["per_class_f1"]) == 4
        assert np.asarray(e["confusion"]).shape == (4, 4)
        assert all(isinstance(v, int) for row in e["confusion"] for v in row)
        assert isinstance(e["failures"], int)


def test_failures_scored_wrong_at_the_farthest_level():
    e = score_records(_records(), B=50)["methods"]["A"]
    # failed items become 1 -> 3 and 3 -> 0: predictions [0, 3, 2, 0] against [0, 1, 2, 3]
    pred = [0, 3, 2, 0]
    assert e["failures"] == 2 and e["failures_by_status"] == {"empty": 1, "parse_error": 1}
    assert e["n_scored"] == 4
    assert e["accuracy"]["value"] == pytest.approx(0.5)
    assert e["mae"]["value"] == pytest.approx((0 + 2 + 0 + 3) / 4)
    assert e["adjacent_accuracy"]["value"] == pytest.approx(0.5)
    assert e["under_triage"]["value"] == pytest.approx(0.25)
    assert e["over_triage"]["value"] == pytest.approx(0.25)
    assert e["macro_f1"]["value"] == pytest.approx(f1_score(GOLD, pred, average="macro", labels=range(4)))
    assert e["macro_f1"]["value"] == pytest.approx((2 / 3 + 0 + 1 + 0) / 4)
    assert e["confusion"] == [[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0]]


def test_failures_dropped_but_counted():
    e = score_records(_records(), failures="drop", B=50)["methods"]["A"]
    assert e["failures"] == 2 and e["n_scored"] == 2
    assert e["accuracy"]["value"] == 1.0 and e["mae"]["value"] == 0.0
    assert sum(map(sum, e["confusion"])) == 2


def test_excluded_items_are_neither_scored_nor_failures():
    m = score_records(_records(), B=50, max_failure_share=1.0)  # A (2 of 4 failed) not flagged
    b = m["methods"]["B"]
    assert b["n_excluded"] == 1 and b["failures"] == 0 and b["n_scored"] == 3
    assert b["accuracy"]["value"] == 1.0
    # B is best by macro-F1; A is compared with it on the 3 items both scored
    assert m["settings"]["best_by_macro_f1"] == "B"
    assert m["paired_vs_best"]["comparisons"]["A"]["n"] == 3


def test_cluster_resampling_when_groups_are_shared():
    recs = [_rec(f"i{i}", "A", i % 4, (i + i // 4) % 4, group=f"u{i // 2}") for i in range(16)]
    assert score_records(recs, B=50)["settings"]["resampling"] == "cluster (groups)"
    solo = [dict(r, group=f"g{j}") for j, r in enumerate(recs)]
    assert score_records(solo, B=50)["settings"]["resampling"] == "item"


def test_chance_row_reproduces_the_seed_table2():
    counts = [127, 54, 123, 212]  # seeds/001 §3.2 label distribution
    recs = [_rec(f"i{n}", "A", lvl, lvl) for n, lvl in enumerate(np.repeat(np.arange(4), counts))]
    ch = score_records(recs, B=20)["chance"]
    seed_row = {"accuracy": 0.250, "macro_f1": 0.238, "weighted_f1": 0.262, "qwk": 0.000,
                "mae": 1.329, "adjacent_accuracy": 0.586, "high_risk_f1": 0.565}
    for k, v in seed_row.items():
        assert ch[k] == pytest.approx(v, abs=1.1e-3), k  # the seed prints 3 decimals


def test_bootstrap_intervals_are_seeded():
    pred = np.random.default_rng(3).integers(0, 4, 40)
    recs = [_rec(f"i{i}", "A", i % 4, int(pred[i])) for i in range(40)]
    a = score_records(recs, B=200, seed=42)["methods"]["A"]["macro_f1"]["ci"]
    b = score_records(recs, B=200, seed=42)["methods"]["A"]["macro_f1"]["ci"]
    c = score_records(recs, B=200, seed=7)["methods"]["A"]["macro_f1"]["ci"]
    assert a == b and a != c


def test_chance_row_per_method_on_its_scored_items():
    """Issue 10 item 4: B holds out i0 (gold Indicator), so its chance row is that of
    labels (0, 1, 1, 1), worked by hand from the uniform guesser's expected confusion
    matrix cm[t, p] = n_t / 4."""
    m = score_records(_records(), B=50, max_failure_share=1.0)
    assert m["methods"]["A"]["chance"] is None  # scored on every item: the main chance row
    ch = m["methods"]["B"]["chance"]
    assert ch["accuracy"] == pytest.approx(1 / 4)
    # classes 1-3: tp 1/4, support 1, predicted 3/4 -> F1 2/7; class 0 predicted, never
    # gold -> F1 0 and still present
    assert ch["macro_f1"] == pytest.approx((0 + 3 * 2 / 7) / 4)
    assert ch["mae"] == pytest.approx((1 + 1 + 1.5) / 3)
    assert m["chance"]["mae"] == pytest.approx((1.5 + 1 + 1 + 1.5) / 4)
    # dropping A's failures leaves A scored on golds (0, 2): its own chance row
    d = score_records(_records(), failures="drop", B=50, max_failure_share=1.0)
    assert d["methods"]["A"]["chance"]["mae"] == pytest.approx((1.5 + 1) / 2)


def test_a_method_failing_on_most_items_is_flagged_not_ranked():
    """Issue 10 item 5: C fails on 3 of 4 items with a call error; it would be best by
    macro-F1 on what it scored only under 'drop', yet it is never ranked."""
    recs = _records() + [
        _rec("i0", "C", 0, 0), *[_rec(f"i{i}", "C", i, None, "error") for i in (1, 2, 3)]]
    for r in recs[-3:]:
        r["detail"] = {"error": "HTTP 401: invalid api key"}
    m = score_records(recs, failures="drop", B=50)
    c = m["methods"]["C"]
    assert c["flagged"] is True and c["failure_share"] == pytest.approx(0.75)
    assert c["top_failure_reasons"] == [["error: HTTP 401: invalid api key", 3]]
    assert c["accuracy"]["value"] == 1.0  # perfect on the one item it answered
    assert m["settings"]["flagged"] == ["A", "C"]  # A: 2 of 4 failed, above 20%
    assert m["settings"]["best_by_macro_f1"] == "B"
    assert set(m["paired_vs_best"]["comparisons"]) == set()
    relaxed = score_records(recs, failures="drop", B=50, max_failure_share=0.8)
    assert relaxed["methods"]["C"]["flagged"] is False
    assert "C" in relaxed["paired_vs_best"]["comparisons"] or relaxed["settings"][
        "best_by_macro_f1"] == "C"
