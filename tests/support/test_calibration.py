"""Judge calibration and panel selection (seeds/002 §3.3, B.1-B.7) on scripted judges."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score

from carebench.models.families import family_of
from carebench.stats.bootstrap import paired_metric_bootstrap
from carebench.support.calibration import calibrate_judges, load_labels
from carebench.support.records import VerdictRecord
from carebench.support.robustness import additive_fit, self_preference_from_counts
from carebench.types import CarebenchError

DIMS = ["recognition", "resources", "deescalation", "compassion", "disclaimers"]
RESPONDERS = ["acme:sage-2", "beta:orb-3"]
N_TASKS = 60


def scripted(tmp_path, seed=11):
    """600 labelled items, 3 clinicians, 15 candidate judges with known noise.

    Judges 0-2 err on disjoint item sets (4 % each), so their majority equals
    the consensus everywhere; judges 3-14 err on a random 20-45 % of items *and*
    on every item a good judge gets wrong, so any panel mixing them in is wrong
    somewhere. The best panel is therefore unambiguous: {judge-00, -01, -02}.
    """
    rng = np.random.default_rng(seed)
    keys = [(f"t{t:02d}", r, f"c{c}") for t in range(N_TASKS) for r in RESPONDERS for c in range(5)]
    n = len(keys)
    truth = rng.random(n) < 0.6
    rows = []
    for rater in range(3):
        flip = rng.random(n) < 0.08
        for (t, r, c), val, f in zip(keys, truth, flip, strict=True):
            rows.append({"task_id": t, "responder": r, "attempt": 0, "criterion_id": c, "rater": f"clin{rater}",
                         "met": "true" if val != f else "false", "dimension": DIMS[int(c[1])]})
    labels = pd.DataFrame(rows)
    path = tmp_path / "labels.csv"
    labels.to_csv(path, index=False)
    H = labels.pivot_table(index=["task_id", "responder", "criterion_id"], columns="rater", values="met",
                           aggfunc="first")
    cons_map = {k: int((row == "true").sum() >= 2) for k, row in H.iterrows()}
    cons = np.array([cons_map[k] for k in keys])
    perm = rng.permutation(n)
    good_err = [perm[k * 24 : (k + 1) * 24] for k in range(3)]
    all_good_err = np.concatenate(good_err)
    judges = [f"acme:judge-{j:02d}" if j % 2 == 0 else f"beta:judge-{j:02d}" for j in range(15)]
    noise = [0.04, 0.04, 0.04] + list(np.linspace(0.2, 0.45, 12))
    verdicts, pred = [], np.zeros((15, n), np.int64)
    for j in range(15):
        wrong = np.zeros(n, bool)
        if j < 3:
            wrong[good_err[j]] = True
        else:
            wrong = rng.random(n) < noise[j]
            wrong[all_good_err] = True
        pred[j] = np.where(wrong, 1 - cons, cons)
        for i, (t, r, c) in enumerate(keys):
            verdicts.append(VerdictRecord(t, r, 0, c, judges[j], bool(pred[j, i]), "", "ok", "final"))
    # one noisy judge fails to parse a few items (counted, never dropped)
    for i in range(5):
        v = verdicts[14 * n + i]
        verdicts[14 * n + i] = VerdictRecord(v.task_id, v.responder, 0, v.criterion_id, v.judge, None, "",
                                             "parse_error", "final")
    return path, verdicts, judges, keys, cons, pred


@pytest.fixture(scope="module")
def calib(tmp_path_factory):
    path, verdicts, judges, keys, cons, pred = scripted(tmp_path_factory.mktemp("calib"))
    out = calibrate_judges(path, verdicts, panel_size=3, B=400)
    return out, judges, keys, cons, pred


def test_enumerates_455_panels_and_selects_least_noisy(calib):
    out, judges, _keys, _cons, _pred = calib
    sel = out["selection"]
    assert sel["n_panels"] == 455 and len(sel["panels"]) == 455
    assert len({tuple(p["members"]) for p in sel["panels"]}) == 455
    assert sel["selected"] == sorted(judges[:3])
    assert sel["panels"][0]["kappa"] == pytest.approx(1.0)
    assert sel["panels"][1]["kappa"] < 1.0
    json.dumps(out, allow_nan=False)


def _majority(pred, members):
    return (pred[list(members)].sum(axis=0) >= 2).astype(int)


def test_panel_kappas_match_sklearn(calib):
    out, judges, keys, cons, pred = calib
    pos = {j: i for i, j in enumerate(judges)}
    # item order inside calibrate is sorted keys; compare on the same items via a key map
    order = np.argsort([f"{t}|{r}#0|{c}" for t, r, c in keys])
    c_sorted = cons[order]
    for entry in out["selection"]["panels"][::91]:
        members = [pos[m] for m in entry["members"]]
        p = _majority(pred, members)[order]
        if 14 in members:  # judge-14's five parse failures count as not-met votes
            fails = np.zeros(len(keys), bool)
            fails[:5] = True
            others = [m for m in members if m != 14]
            p = (pred[others].sum(axis=0) + np.where(fails, 0, pred[14]) >= 2).astype(int)[order]
        assert entry["kappa"] == pytest.approx(cohen_kappa_score(c_sorted, p))
        assert entry["macro_f1"] == pytest.approx(f1_score(c_sorted, p, average="macro"))
    assert sum(1 for _ in combinations(range(15), 3)) == 455


def test_candidate_metrics_and_failures_counted(calib):
    out, judges, _keys, cons, pred = calib
    j = judges[5]
    assert out["candidates"][j]["kappa"] == pytest.approx(cohen_kappa_score(cons, pred[5]))
    assert out["candidates"][j]["macro_f1"] == pytest.approx(f1_score(cons, pred[5], average="macro"))
    assert out["counts"]["candidate_votes_failed_or_missing"][judges[14]] == 5
    assert out["counts"]["items"] == 600 and out["counts"]["items_with_consensus"] == 600
    assert set(out["candidates"][j]["ac1"]) == {"pooled", *DIMS}


def test_lead_interval_resamples_tasks(calib, tmp_path):
    """The lead's interval is a paired bootstrap over *tasks* (criterion judgments of a task
    travel together), recomputed here with a plain loop and sklearn's kappa."""
    out, judges, keys, cons, pred = calib
    lead = out["selection"]["lead"]
    assert lead["seed"] == 12345 and lead["B"] == 400 and lead["n_tasks"] == N_TASKS
    assert lead["leader"] == sorted(judges[:3])
    assert lead["ci"][0] <= lead["diff"] <= lead["ci"][1]
    pos = {j: i for i, j in enumerate(judges)}
    order = np.argsort([f"{t}|{r}#0|{c}" for t, r, c in keys])
    pa = _majority(pred, [pos[m] for m in lead["leader"]])[order]
    runner = [pos[m] for m in lead["runner_up"]]
    assert 14 not in runner
    pb = _majority(pred, runner)[order]
    c = cons[order]
    assert lead["diff"] == pytest.approx(cohen_kappa_score(c, pa) - cohen_kappa_score(c, pb))
    task_of = np.array([keys[i][0] for i in order])
    names = np.unique(task_of)
    members = [np.flatnonzero(task_of == t) for t in names]
    draws = np.random.default_rng(12345).integers(0, len(names), size=(400, len(names)))
    diffs = []
    for row in draws:
        idx = np.concatenate([members[t] for t in row])
        diffs.append(cohen_kappa_score(c[idx], pa[idx]) - cohen_kappa_score(c[idx], pb[idx]))
    assert lead["ci"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])))
    # resampling single judgments instead (the old rule) gives a different interval
    item = paired_metric_bootstrap(c, pa, pb, 2, "kappa", B=400, seed=12345)
    assert list(item.ci) != pytest.approx(lead["ci"])


def test_human_agreement_ceiling(calib, tmp_path):
    out, *_ = calib
    h = out["human"]
    lab = load_labels(scripted(tmp_path)[0])
    wide = lab.pivot_table(index=["task_id", "response_id", "criterion_id"], columns="rater", values="met",
                           aggfunc="first").astype(int)
    k01 = cohen_kappa_score(wide["clin0"], wide["clin1"])
    pair = next(p for p in h["pairwise"] if p["a"] == "clin0" and p["b"] == "clin1")
    assert pair["kappa"] == pytest.approx(k01)
    assert len(h["pairwise"]) == 3
    assert h["fleiss_kappa"] == pytest.approx(_fleiss(wide.to_numpy()))
    dim_of = {c: DIMS[int(c[1])] for c in wide.index.get_level_values("criterion_id")}
    rows_dim = np.array([dim_of[c] for c in wide.index.get_level_values("criterion_id")])
    for d in DIMS:  # Table 5: kappa per dimension beside AC1 and agreement
        assert h["fleiss_kappa_by_dimension"][d] == pytest.approx(_fleiss(wide.to_numpy()[rows_dim == d]))
    assert "disclaimers" in h["ac1"]
    assert "without_disclaimers" in out["selection"]


def _fleiss(R: np.ndarray) -> float:
    """Fleiss' kappa of binary ratings (items x raters), textbook formula."""
    n = R.shape[1]
    yes = R.sum(axis=1)
    counts = np.stack([n - yes, yes], axis=1)
    p_j = counts.sum(axis=0) / counts.sum()
    P_i = (np.square(counts).sum(axis=1) - n) / (n * (n - 1))
    return float((P_i.mean() - np.square(p_j).sum()) / (1 - np.square(p_j).sum()))


def test_label_loading_errors(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("task_id,response_id,criterion_id,rater,met\nt1,r#0,c1,a,maybe\n")
    with pytest.raises(CarebenchError, match=r"bad.csv: line 2: field 'met'"):
        load_labels(p)
    p.write_text("task_id,criterion_id,rater,met\nt1,c1,a,1\n")
    with pytest.raises(CarebenchError, match="response_id"):
        load_labels(p)
    p.write_text("task_id,criterion_id,met\n")
    with pytest.raises(CarebenchError, match="missing column 'rater'"):
        load_labels(p)
    j = tmp_path / "ok.jsonl"
    j.write_text(json.dumps({"task_id": "t", "response_id": "m#1", "criterion_id": "c", "rater": "x",
                             "met": True}) + "\n")
    assert load_labels(j)["responder"].tolist() == ["m"]


def test_self_preference_recovers_planted_effect():
    judges = ["acme:sage-j", "beta:orb-j", "gamma:kite-j", "delta:lark-j"]
    resp = [f"{f}-r{k}" for f in ("acme:sage", "beta:orb", "gamma:kite", "delta:lark") for k in (1, 2)]
    a = np.array([0.10, -0.05, 0.02, -0.07])  # judge leniency
    b = np.linspace(-0.1, 0.1, 8)  # responder quality
    delta = 0.2  # acme's judge favours its own family
    M = 0.6 + a[:, None] + b[None, :]
    M[0, :2] += delta
    n = np.full(M.shape, 1000.0)
    sp = self_preference_from_counts(judges, resp, M * n, n)
    # double centring leaves delta*(1-1/J)*(1-2/R) on the planted block (J=4 judges, R=8 responders)
    assert sp["own_family"]["acme:sage-j"]["residual"] == pytest.approx(delta * 9 / 16)
    assert sp["own_family"]["beta:orb-j"]["residual"] == pytest.approx(delta / 16)
    assert sp["residual_by_family"]["acme:sage-j"]["beta:orb"] == pytest.approx(-3 * delta / 16)
    lenient = sp["leniency"]
    assert lenient["beta:orb-j"] - lenient["delta:lark-j"] == pytest.approx(a[1] - a[3])
    assert sp["own_family"]["acme:sage-j"]["own_ranks_in_column"] == {"acme:sage-r1": 2, "acme:sage-r2": 1}


def test_additive_fit_without_interaction_is_exact():
    rng = np.random.default_rng(0)
    ra, rb = rng.normal(size=5) * 0.1, rng.normal(size=7) * 0.1
    M = 0.5 + ra[:, None] + rb[None, :]
    M[1, 3] = np.nan  # unobserved cell is allowed
    mu, a, b, e = additive_fit(M)
    assert np.nanmax(np.abs(e)) < 1e-12 and np.isnan(e[1, 3])
    assert a == pytest.approx(ra - ra.mean()) and b == pytest.approx(rb - rb.mean())
    assert mu == pytest.approx(0.5 + ra.mean() + rb.mean())


def test_family_mapping():
    assert family_of("openai:gpt-4o-mini") == "openai:gpt"
    assert family_of("openai:gpt-4.1@http://localhost:8000/v1") == "openai:gpt"
    assert family_of("anthropic:claude-3-5-haiku") == "anthropic:claude"
    assert family_of("llamacpp:/models/SmolLM2-135M.gguf") == "llamacpp:smollm2"
    assert family_of("openai:x", {"openai:x": "meta"}) == "meta"
    assert family_of("openai:x", lambda s: s.upper()) == "OPENAI:X"


def test_selection_uses_final_scope_and_compares_anywhere(tmp_path):
    path, verdicts, judges, *_ = scripted(tmp_path)
    anywhere = [VerdictRecord(v.task_id, v.responder, v.attempt, v.criterion_id, v.judge, True, "", "ok",
                              "anywhere") for v in verdicts]
    out = calibrate_judges(path, anywhere + verdicts, B=50)  # "anywhere" lines first: must not shadow final ones
    assert out["selection"]["selected"] == sorted(judges[:3])
    comp = out["scope_comparison"]["by_scope"]
    assert comp["final"]["kappa"] == pytest.approx(1.0)
    assert comp["anywhere"]["kappa"] == pytest.approx(0.0)  # constant "met" carries no agreement beyond chance


def test_per_dimension_agreement(calib, tmp_path):
    out, judges, keys, cons, pred = calib
    dims = np.array([DIMS[int(c[1])] for _, _, c in keys])
    m = dims == "disclaimers"
    cand = out["candidates"][judges[4]]
    assert cand["percent_agreement_by_dimension"]["disclaimers"] == pytest.approx((pred[4][m] == cons[m]).mean())
    # clinicians: share of agreeing rater pairs per item (3 pairs of 3 raters), averaged
    lab = load_labels(scripted(tmp_path)[0])
    wide = lab.pivot_table(index=["task_id", "response_id", "criterion_id"], columns="rater", values="met",
                           aggfunc="first").astype(int).to_numpy()
    wdims = np.array([DIMS[int(k[2][1])] for k in lab.groupby(["task_id", "response_id", "criterion_id"]).groups])
    pairs = (wide[:, [0]] == wide[:, [1]]).astype(int) + (wide[:, [0]] == wide[:, [2]]) + (wide[:, [1]] == wide[:, [2]])
    assert out["human"]["percent_agreement"]["disclaimers"] == pytest.approx(pairs[wdims == "disclaimers"].mean() / 3)
    # the selected panel per dimension (Table 5), against sklearn on the same items
    order = np.argsort([f"{t}|{r}#0|{c}" for t, r, c in keys])
    panel = (pred[:3].sum(axis=0) >= 2).astype(int)[order]
    sel = out["selected_by_dimension"]
    for d in DIMS:
        mm = dims[order] == d
        assert sel["kappa_by_dimension"][d] == pytest.approx(cohen_kappa_score(cons[order][mm], panel[mm]))


def test_calibration_reads_no_majority_as_scoring_does(tmp_path):
    """One panel rule: a 1-1 split with a failed vote earns no credit in scoring, so
    calibration reads it as "not met" on a positive criterion and "met" (the behaviour
    occurred) on a negative one. Hand-worked on one task of six criteria."""
    from test_tasks import _row

    from carebench.support.records import ResponseTable, VerdictTable
    from carebench.support.scoring import score
    from carebench.support.tasks import Task

    row = _row("T")
    row["criteria"][5]["negative"] = True
    task = Task.model_validate(row)
    cids = [c.id for c in task.criteria]
    consensus = {"c0": True, "c1": True, "c2": True, "c3": True, "c4": False, "c5": True}
    labels = pd.DataFrame([{"task_id": "T", "response_id": "r#0", "criterion_id": c, "rater": k,
                            "met": consensus[c]} for c in cids for k in ("x", "y", "z")])
    votes = {c: (True, True, True) for c in cids}
    votes["c4"] = (False, False, False)
    votes["c0"] = votes["c5"] = (True, False, None)  # no majority
    verdicts = [VerdictRecord("T", "r", 0, c, j, v, "", "ok" if v is not None else "parse_error", "final")
                for c in cids for j, v in zip(("ja", "jb", "jc"), votes[c], strict=True)]
    out = calibrate_judges(labels, verdicts, panel_size=3, B=50, tasks=[task])
    panel = out["selection"]["panels"][0]
    # labels read: c0 -> 0 (positive, no credit), c5 -> 1 (negative, no credit); others as voted
    assert panel["met_rate"] == pytest.approx(4 / 6)  # c1, c2, c3, c5
    assert panel["percent_agreement"] == pytest.approx(5 / 6)  # only c0 disagrees with consensus
    # judge jc alone (a panel of one whose vote failed) follows the same rule
    assert out["candidates"]["jc"]["met_rate"] == pytest.approx(4 / 6)
    # scoring credits exactly the cells calibration reads as "earned"
    rt = ResponseTable.from_columns(["T"], ["r"], [0], ["ok"], empty=[False])
    vt = VerdictTable.from_records(verdicts)
    sc = score([task], rt, vt, panel=["ja", "jb", "jc"])
    credited = dict(zip(cids, sc.cell_pass.tolist(), strict=True))
    assert credited == {"c0": False, "c1": True, "c2": True, "c3": True, "c4": False, "c5": False}


def test_calibration_headline_names_the_selected_panel_and_its_kappa(calib):
    from carebench.support.calibration_report import calibration_headline

    result = calib[0]
    h = calibration_headline(result)
    sel = result["selection"]
    assert h.verdict == "Selected panel: " + " + ".join(sel["selected"])
    panel = next(p for p in sel["panels"] if list(p["members"]) == list(sel["selected"]))
    assert h.value.value == pytest.approx(panel["kappa"]) and h.n == result["counts"]["items_with_consensus"]
    assert ("not separable" in " ".join(h.caveats)) == bool(sel["lead"]["spans_zero"])
