"""`carebench compare`: numbers checked against independent references.

References are computed here from the verdicts as written (panel majority, weights,
means worked out in plain Python) and from the documented resample draws
(``default_rng(seed).integers(0, n_units, (B, n_units))``), never from the code under test.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from run_dirs import JUDGES, support_tasks, write_plural_run, write_risk_run, write_support_run
from sklearn.metrics import f1_score

from carebench.cli import main
from carebench.compare.command import CompareConfig, compare_runs
from carebench.suites import comparer

WEIGHTS = list(range(1, 8))  # criterion c{k} has weight k + 1 (runs.support_tasks)


def _bit(*parts: object) -> bool:
    """A fixed pseudo-random verdict from its coordinates."""
    return hashlib.sha256("|".join(map(str, parts)).encode()).digest()[0] < 150


def _verdicts(skill: dict[str, int]):
    def met(r, t, a, c, j):
        return hashlib.sha256(f"{r}|{t}|{a}|{c}|{j}".encode()).digest()[0] < skill[r]
    return met


def _task_scores(tasks, responder, met, attempts):
    """Hand rule: a criterion is met when >= 2 of 3 judges say met; score = earned / total weight,
    mean over attempts."""
    out = {}
    for t in tasks:
        per_attempt = []
        for a in range(attempts):
            earned = sum(w for k, w in enumerate(WEIGHTS)
                         if sum(met(responder, t["id"], a, f"c{k}", j) for j in JUDGES) >= 2)
            per_attempt.append(earned / sum(WEIGHTS))
        out[t["id"]] = sum(per_attempt) / attempts
    return out


def _run(args, capsys):
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def _row(metrics, metric, pair=0):
    return next(r for r in metrics["pairs"][pair]["rows"] if r["metric"] == metric)


# ----------------------------------------------------------------------------- numbers


def test_paired_difference_and_interval_equal_a_numpy_loop_over_the_same_draws(tmp_path):
    tasks = support_tasks(12)
    met = _verdicts({"m-base": 170, "m-cand": 140})
    base = write_support_run(tmp_path / "b", tasks, ["m-base"], met, attempts=2)
    cand = write_support_run(tmp_path / "c", tasks, ["m-cand"], met, attempts=2)
    B, seed = 500, 12345
    m = compare_runs(CompareConfig(str(base), str(cand), B=B, seed=seed), comparer)
    sb = _task_scores(tasks, "m-base", met, 2)
    sc = _task_scores(tasks, "m-cand", met, 2)
    ids = sorted(sb)
    xb, xc = np.array([sb[i] for i in ids]), np.array([sc[i] for i in ids])
    idx = np.random.default_rng(seed).integers(0, len(ids), size=(B, len(ids)))
    diffs = np.array([xc[row].mean() - xb[row].mean() for row in idx])
    row = _row(m, "score")
    assert m["pairs"][0]["n_units"] == 12
    assert row["base"] == pytest.approx(xb.mean(), abs=1e-12)
    assert row["candidate"] == pytest.approx(xc.mean(), abs=1e-12)
    assert row["diff"] == pytest.approx(xc.mean() - xb.mean(), abs=1e-12)
    assert row["ci"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
    assert row["p_worse"] == pytest.approx(float(np.mean(diffs < 0)))
    assert row["verdict"] in ("regression", "not separable", "improvement")
    lo, hi = row["ci"]
    assert row["verdict"] == ("regression" if hi < 0 else "improvement" if lo > 0 else "not separable")


def test_risk_macro_f1_difference_equals_a_loop_of_sklearn_scores(tmp_path):
    rng = np.random.default_rng(3)
    gold = {f"i{k:02d}": int(rng.integers(0, 4)) for k in range(40)}
    pa = {i: (g if rng.random() < 0.8 else int(rng.integers(0, 4))) for i, g in gold.items()}
    pb = {i: (g if rng.random() < 0.5 else int(rng.integers(0, 4))) for i, g in gold.items()}
    base = write_risk_run(tmp_path / "b", gold, {"clf": pa})
    cand = write_risk_run(tmp_path / "c", gold, {"clf": pb})
    B = 300
    m = compare_runs(CompareConfig(str(base), str(cand), B=B), comparer)
    ids = sorted(gold)
    y = np.array([gold[i] for i in ids])
    a = np.array([pa[i] for i in ids])
    b = np.array([pb[i] for i in ids])
    idx = np.random.default_rng(12345).integers(0, len(ids), size=(B, len(ids)))

    def f1(t, p):
        return f1_score(t, p, labels=[0, 1, 2, 3], average="macro", zero_division=0)

    diffs = np.array([f1(y[r], b[r]) - f1(y[r], a[r]) for r in idx])
    row = _row(m, "macro_f1")
    assert row["diff"] == pytest.approx(f1(y, b) - f1(y, a), abs=1e-12)
    assert row["ci"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-9)
    # under-triage: true Behavior/Attempt predicted lower, counted by hand
    severe = y >= 2
    ut_a, ut_b = (severe & (a < y)).sum() / severe.sum(), (severe & (b < y)).sum() / severe.sum()
    ut = _row(m, "under_triage")
    assert (ut["base"], ut["candidate"]) == (pytest.approx(ut_a), pytest.approx(ut_b))
    assert ut["higher_is_better"] is False and ut["section"] == "safety"
    low = y < 2
    assert _row(m, "over_triage")["candidate"] == pytest.approx((low & (b > y)).sum() / low.sum())
    # drill-down: exactly the items whose level moved by two or more
    moved = sorted(i for i in ids if abs(pb[i] - pa[i]) >= 2)
    shown = m["drilldown"][0]["rows"]
    assert sorted(r[0] for r in shown) == moved[:20] or len(moved) > 20
    assert all(abs(r[4]) >= 2 for r in shown)


def test_candidate_worse_on_three_of_ten_tasks_by_a_known_amount(tmp_path):
    tasks = support_tasks(10)
    base = write_support_run(tmp_path / "b", tasks, ["m1"], lambda *a: True)
    # c6 (harmless, weight 7 of 28) not met on t00, t01, t02: each loses 7/28 = 0.25
    cand = write_support_run(tmp_path / "c", tasks, ["m2"],
                             lambda r, t, a, c, j: not (t in ("t00", "t01", "t02") and c == "c6"))
    m = compare_runs(CompareConfig(str(base), str(cand)), comparer)
    assert m["settings"]["pairs"] == [["m1", "m2"]]  # the only responder of each run is paired
    assert _row(m, "score")["diff"] == pytest.approx(-3 * 0.25 / 10)
    assert _row(m, "dimension:harmless")["diff"] == pytest.approx(-0.3)
    assert _row(m, "dimension:recognition")["diff"] == pytest.approx(0.0)
    # sub_0 holds t00, t03, t06, t09: one of four loses 0.25
    assert _row(m, "subcategory:sub_0")["diff"] == pytest.approx(-0.25 / 4)
    flips = m["drilldown"][0]
    assert [(r[0], r[1]) for r in flips["rows"]] == [("t00", "c6"), ("t01", "c6"), ("t02", "c6")]
    assert flips["rows"][0][2] == "Criterion 6 of task 0: does the reply do <harmless>?"
    assert flips["rows"][0][7] == "reply of m1 to t00 attempt 0"
    assert flips["rows"][0][8] == "reply of m2 to t00 attempt 0"
    # a run with records.jsonl only (no Parquet copy) gives the same comparison
    (cand / "records.parquet").unlink()
    again = compare_runs(CompareConfig(str(base), str(cand)), comparer)
    assert again["pairs"] == m["pairs"] and again["drilldown"] == m["drilldown"]


def test_a_run_compared_with_itself_is_zero_not_separable_and_exit_0(tmp_path, capsys):
    tasks = support_tasks(8)
    run = write_support_run(tmp_path / "r", tasks, ["m1", "m2"], _verdicts({"m1": 150, "m2": 100}))
    rc, out, _ = _run(["compare", str(run), str(run), "--out", str(tmp_path / "cmp")], capsys)
    assert rc == 0 and out.startswith("pass")
    m = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert [p["base"] for p in m["pairs"]] == ["m1", "m2"]
    for p in m["pairs"]:
        for r in p["rows"]:
            assert r["diff"] == 0 and r["ci"] == [0, 0] and r["verdict"] == "not separable"
            assert r["p_worse"] == 0
    manifest = json.loads((tmp_path / "cmp" / "manifest.json").read_text())
    assert manifest["suite"] == "compare"
    assert manifest["base"]["path"] == str(run) and manifest["candidate"]["path"] == str(run)


def test_a_clearly_worse_candidate_exits_1_and_junit_has_exactly_the_gated_metrics(tmp_path, capsys):
    tasks = support_tasks(12)
    base = write_support_run(tmp_path / "b", tasks, ["m"], lambda *a: True)
    cand = write_support_run(tmp_path / "c", tasks, ["m"], lambda r, t, a, c, j: c not in ("c0", "c6"))
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    rc, out, _ = _run(["compare", str(base), str(cand), "--out", str(tmp_path / "cmp"), "--junit", str(junit),
                       "--summary", str(summary), "--gate", "score", "--gate", "dimension:harmless",
                       "--gate", "dimension:compassion"], capsys)
    assert rc == 1 and out.startswith("FAIL")
    root = ET.parse(junit).getroot()
    cases = root.findall("./testsuite/testcase")
    names = {c.get("name"): c.find("failure") is not None for c in cases}
    assert names == {"score [m -> m]": True, "dimension:harmless [m -> m]": True,
                     "dimension:compassion [m -> m]": False}
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    text = summary.read_text()
    assert "FAIL" in text and text.count("**regression**") == 2
    # the default gate (support: the weighted score) gives exit 1 too
    rc, _, _ = _run(["compare", str(base), str(cand), "--out", str(tmp_path / "cmp2")], capsys)
    assert rc == 1
    # a margin wider than the drop: not a regression (score drops by (1 + 7) / 28)
    rc, _, _ = _run(["compare", str(base), str(cand), "--out", str(tmp_path / "cmp3"), "--gate", "score:0.3"],
                    capsys)
    assert rc == 0
    m = json.loads((tmp_path / "cmp3" / "metrics.json").read_text())
    assert _row(m, "score")["diff"] == pytest.approx(-8 / 28) and _row(m, "score")["margin"] == 0.3


def test_runs_with_different_judge_panels_are_refused_naming_the_difference(tmp_path, capsys):
    tasks = support_tasks(6)
    base = write_support_run(tmp_path / "b", tasks, ["m"], lambda *a: True)
    other = [*JUDGES[:2], "mistral:judge-d"]
    cand = write_support_run(tmp_path / "c", tasks, ["m"], lambda *a: True, judges=other)
    rc, _out, err = _run(["compare", str(base), str(cand), "--out", str(tmp_path / "cmp")], capsys)
    assert rc == 2
    assert "not comparable" in err and "panel: base" in err and "mistral:judge-d" in err
    assert not (tmp_path / "cmp").exists()
    # --allow-different panel: compared, and the override is stated in the report
    rc, _, _ = _run(["compare", str(base), str(cand), "--out", str(tmp_path / "cmp"),
                     "--allow-different", "panel"], capsys)
    assert rc == 0
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert "overridden on purpose (--allow-different): panel" in report
    assert "mistral:judge-d" in (tmp_path / "cmp" / "report.html").read_text()
    m = json.loads((tmp_path / "cmp" / "metrics.json").read_text())
    assert [o["key"] for o in m["comparability"]["overridden"]] == ["panel"]
    # an unknown key is a usage error
    rc, _, err = _run(["compare", str(base), str(cand), "--allow-different", "nonsense"], capsys)
    assert rc == 2 and "no such comparability key" in err


def test_differences_are_listed_at_most_ten_then_counted(tmp_path, capsys):
    tasks = support_tasks(4)
    base = write_support_run(tmp_path / "b", tasks, ["m"], lambda *a: True, rerender=False)
    extra = {"dataset": {"sha256": "00" * 32}, "scoring": {"panel": ["x"], "scope": "anywhere", "seed": 1,
                                                           "bootstrap": 5, "family": {"x": "y"}}}
    cand = write_support_run(tmp_path / "c", support_tasks(5), ["m"], lambda *a: True, rerender=False,
                             attempts=2, extra=extra)
    rc, _, err = _run(["compare", str(base), str(cand)], capsys)
    assert rc == 2
    listed = [line for line in err.splitlines() if line.startswith("  ")]
    keys = {line.split(":")[0].strip() for line in listed}
    assert {"dataset", "tasks", "criteria", "families", "attempts", "scoring.scope", "scoring.bootstrap"} <= keys
    assert "8 differences" in err  # panel differs too: the manifest names a panel of one


def test_compare_directory_rerenders_byte_for_byte(tmp_path, capsys):
    tasks = support_tasks(6)
    base = write_support_run(tmp_path / "b", tasks, ["m"], lambda *a: True)
    cand = write_support_run(tmp_path / "c", tasks, ["m"], lambda r, t, a, c, j: c != "c3")
    out = tmp_path / "cmp"
    assert _run(["compare", str(base), str(cand), "--out", str(out)], capsys)[0] == 1

    def files():
        return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    before = files()
    assert "figures/forest-1.png" in before and "figures/forest-gated.png" in before
    html = before["report.html"].decode()
    # the flipped criterion's text is dataset text: escaped, never markup
    assert "does the reply do &lt;resources&gt;?" in html and "<resources>" not in html
    (out / "report.md").unlink()
    (out / "report.html").write_text("stale")
    assert _run(["report", str(out)], capsys)[0] == 0
    assert files() == before


def test_plural_full_alignment_per_profile_with_source_case_clusters(tmp_path):
    prompts = [{"id": f"q{i}", "source_id": f"s{i // 2}", "context": "forum", "text": f"prompt <{i}>"}
               for i in range(8)]
    policies = {("P1", p["id"]): ["RESPONSE_1", "RESPONSE_2"] for p in prompts}
    policies |= {("C1", p["id"]): ["RESPONSE_3"] for p in prompts}
    arch = {"P1": "peer", "C1": "clinician"}
    judges = ["j1", "j2", "j3"]
    base = write_plural_run(tmp_path / "b", prompts, policies, arch, ["sys"], judges,
                            lambda s, pr, q, j: (True, policies[(pr, q)]))
    # candidate: judge j1 finds RESPONSE_2 missing on q0..q3 of P1 -> j1's full rate on P1 is 4/8
    cand = write_plural_run(
        tmp_path / "c", prompts, policies, arch, ["sys"], judges,
        lambda s, pr, q, j: (True, ["RESPONSE_1"] if (pr == "P1" and j == "j1" and q in ("q0", "q1", "q2", "q3"))
                             else policies[(pr, q)]))
    B = 400
    m = compare_runs(CompareConfig(str(base), str(cand), B=B), comparer)
    p = m["pairs"][0]
    assert (p["n_units"], p["n_clusters"]) == (8, 4)
    row = _row(m, "full:P1")
    # judge mean (1/2 + 1 + 1) / 3 vs 1
    assert row["diff"] == pytest.approx((0.5 + 1 + 1) / 3 - 1)
    assert row["gated"] and _row(m, "full:C1")["gated"]
    # coverage: j1 covers 1/2 on four prompts -> (6/8 + 1 + 1) / 3
    assert _row(m, "coverage:P1")["diff"] == pytest.approx((0.75 + 1 + 1) / 3 - 1)
    # the interval: whole source cases resampled (q0,q1 = s0 ... q6,q7 = s3); per resample j1's
    # full rate is the share of drawn prompts outside s0 and s1
    idx = np.random.default_rng(12345).integers(0, 4, size=(B, 4))
    bad = np.isin(idx, [0, 1]).sum(axis=1)  # drawn cases with two failed prompts each
    diffs = ((1 - bad / 4) + 1 + 1) / 3 - 1
    assert row["ci"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])), abs=1e-12)
    # Table 15 view: RESPONSE_2 for peers, each unit the mean of its judges: 4 units at 2/3, 4 at 1
    sat = _row(m, "satisfaction:peer:RESPONSE_2")
    assert sat["section"] == "safety" and sat["diff"] == pytest.approx((4 * 2 / 3 + 4) / 8 - 1)


# ----------------------------------------------------------------------------- bad input


@pytest.fixture
def support_pair(tmp_path):
    tasks = support_tasks(4)
    return (write_support_run(tmp_path / "b", tasks, ["m"], lambda *a: True, rerender=False),
            write_support_run(tmp_path / "c", tasks, ["m"], lambda *a: True, rerender=False))


def _one_line_exit_2(args, capsys, needle):
    rc, _, err = _run(args, capsys)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1, err
    assert needle in err and "Traceback" not in err


def test_missing_run_directory(support_pair, tmp_path, capsys):
    _one_line_exit_2(["compare", str(support_pair[0]), str(tmp_path / "nope")], capsys, "no such run directory")


def test_partial_run_directory(support_pair, capsys):
    (support_pair[1] / "records.jsonl").unlink()
    _one_line_exit_2(["compare", *map(str, support_pair)], capsys, "partial run directory")


def test_run_cut_short_by_the_budget(support_pair, capsys):
    mf = support_pair[1] / "manifest.json"
    m = json.loads(mf.read_text())
    mf.write_text(json.dumps({**m, "status": "incomplete", "incomplete": ["judging"]}))
    _one_line_exit_2(["compare", *map(str, support_pair)], capsys, "incomplete run (judging)")
    _one_line_exit_2(["leaderboard", *map(str, support_pair)], capsys, "incomplete run")


def test_runs_of_different_suites(support_pair, tmp_path, capsys):
    risk = write_risk_run(tmp_path / "risk", {"a": 1, "b": 2}, {"x": {"a": 1, "b": 2}}, rerender=False)
    _one_line_exit_2(["compare", str(support_pair[0]), str(risk)], capsys, "compare runs of one suite")


def test_a_directory_that_is_not_a_run(support_pair, tmp_path, capsys):
    d = tmp_path / "plain"
    d.mkdir()
    (d / "notes.txt").write_text("hello")
    _one_line_exit_2(["compare", str(d), str(support_pair[0])], capsys, "not a carebench run directory")
    (d / "manifest.json").write_text(json.dumps({"suite": "construct", "status": "complete"}))
    (d / "records.jsonl").write_text("")
    _one_line_exit_2(["compare", str(d), str(d)], capsys, "take risk, support, plural and converse runs")
    (d / "manifest.json").write_text("{not json")
    _one_line_exit_2(["compare", str(d), str(d)], capsys, "not valid JSON")


def test_unknown_gate_and_bad_pair_are_usage_errors(support_pair, capsys):
    _one_line_exit_2(["compare", *map(str, support_pair), "--gate", "nonsense"], capsys, "no such metric")
    _one_line_exit_2(["compare", *map(str, support_pair), "--responder", "m"], capsys, "expected BASE_NAME=")
    _one_line_exit_2(["compare", *map(str, support_pair), "--responder", "x=m"], capsys, "no scored system 'x'")


def test_the_paths_written_do_not_depend_on_the_cwd(support_pair, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc, _out, _ = _run(["compare", *map(str, support_pair)], capsys)
    assert rc == 0
    made = [p for p in Path("runs").iterdir() if p.name.startswith("compare-")]
    assert len(made) == 1 and (made[0] / "manifest.json").is_file()


def test_gate_parsing_and_the_ten_line_cap():
    from carebench.compare.comparability import Check
    from carebench.compare.paired import Gate, verdict

    assert Gate.parse("score") == Gate("score", None)
    assert Gate.parse("score:0.02") == Gate("score", 0.02)
    assert Gate.parse("full:P1") == Gate("full:P1", None)
    assert Gate.parse("full:P1:0.1") == Gate("full:P1", 0.1)
    check = Check(differences=[(f"k{i:02d}", i, i + 1) for i in range(13)])
    lines = check.lines()
    assert len(lines) == 11 and lines[-1] == "... and 3 more difference(s)"
    # verdicts by hand: higher is better, then lower is better (the interval is mirrored)
    assert verdict(-0.3, -0.1, 0.0, True) == "regression"
    assert verdict(-0.3, -0.1, 0.2, True) == "not separable"
    assert verdict(0.1, 0.3, 0.0, True) == "improvement"
    assert verdict(0.1, 0.3, 0.0, False) == "regression"
    assert verdict(-0.3, -0.1, 0.0, False) == "improvement"
    assert verdict(-0.1, 0.0, 0.0, True) == "not separable"
