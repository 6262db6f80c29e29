"""`carebench risk agreement` (issue 10, item 11) against independent references."""

from __future__ import annotations

import json
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app

LEVELS = {"a": 0, "b": 1, "c": 2, "d": 3}


def _fleiss_1971(r: np.ndarray) -> float:
    """Fleiss (1971) for complete data, written out."""
    N, n = r.shape
    counts = [[int((row == c).sum()) for c in range(4)] for row in r]
    P_i = [(sum(x * x for x in row) - n) / (n * (n - 1)) for row in counts]
    p_j = [sum(row[j] for row in counts) / (N * n) for j in range(4)]
    pe = sum(p * p for p in p_j)
    return (sum(P_i) / N - pe) / (1 - pe)


def test_agreement_on_a_ratings_table_matches_references(tmp_path):
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 4, 40)
    noisy = [np.clip(truth + rng.choice([-1, 0, 0, 0, 1], 40), 0, 3) for _ in range(3)]
    r = np.stack(noisy, axis=1)
    p = tmp_path / "ratings.csv"
    names = ["Indicator", "Ideation", "Behavior", "Attempt"]
    # rater 1 as letters, rater 2 as level names, rater 3 as numbers: all accepted
    p.write_text("id,r1,r2,r3\n" + "".join(
        f"p{i},{'abcd'[a]},{names[b]},{c}\n" for i, (a, b, c) in enumerate(r)))
    out = tmp_path / "agreement.json"
    res = CliRunner().invoke(app, ["agreement", "--data", str(p), "--bootstrap", "300",
                                   "--out", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    assert "pairwise quadratic-weighted kappa" in res.output
    got = json.loads(out.read_text())
    for pair, (a, b) in zip(got["pairwise_qwk"], combinations(range(3), 2), strict=True):
        ref = cohen_kappa_score(r[:, a], r[:, b], weights="quadratic")
        assert pair["qwk"]["value"] == pytest.approx(ref, abs=1e-12)
        lo, hi = pair["qwk"]["ci"]
        assert lo <= ref <= hi and lo < hi
        assert pair["disagreements"] == int((r[:, a] != r[:, b]).sum())
        assert pair["max_gap"] == int(np.abs(r[:, a] - r[:, b]).max())
    alpha = krippendorff.alpha(reliability_data=r.T.astype(float), level_of_measurement="ordinal")
    assert got["krippendorff_alpha_ordinal"]["value"] == pytest.approx(alpha, abs=1e-9)
    assert got["fleiss_kappa"]["value"] == pytest.approx(_fleiss_1971(r), abs=1e-12)
    lo, hi = got["fleiss_kappa"]["ci"]
    assert lo <= got["fleiss_kappa"]["value"] <= hi


def test_missing_ratings_are_left_out_pairwise(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("id,r1,r2\n1,a,a\n2,b,\n3,c,d\n4,d,d\n5,b,b\n")
    out = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["agreement", "--data", str(p), "--bootstrap", "50",
                                   "--out", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    pair = json.loads(out.read_text())["pairwise_qwk"][0]
    assert pair["n"] == 4
    ref = cohen_kappa_score([0, 2, 3, 1], [0, 3, 3, 1], weights="quadratic", labels=range(4))
    assert pair["qwk"]["value"] == pytest.approx(ref, abs=1e-12)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,r1,r2\n1,a,maybe\n")
    res = CliRunner().invoke(app, ["agreement", "--data", str(bad)])
    assert "line 2: column 'r2'" in str(res.exception)


def test_agreement_between_methods_of_a_run(tmp_path):
    run = tmp_path / "run"
    res = CliRunner().invoke(app, ["run", "--data", "builtin:sample", "--method", "tfidf-lr",
                                   "--method", "tfidf-ordinal", "--out", str(run),
                                   "--bootstrap", "20"])
    assert res.exit_code == 0, repr(res.exception)
    out = tmp_path / "a.json"
    res = CliRunner().invoke(app, ["agreement", "--data", str(run), "--bootstrap", "50",
                                   "--out", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    got = json.loads(out.read_text())
    assert got["raters"] == ["gold", "tfidf-lr", "tfidf-ordinal"]
    recs = read_jsonl(run / "records.jsonl")
    gold = [r["gold"] for r in recs if r["method"] == "tfidf-lr"]
    lr = [r["pred"] for r in recs if r["method"] == "tfidf-lr"]
    assert got["pairwise_qwk"][0]["qwk"]["value"] == pytest.approx(
        cohen_kappa_score(gold, lr, weights="quadratic"), abs=1e-12)
