"""``converse calibrate``: three scripted judges walk 12 conversations on the loopback stub;
3 clinicians' hand-written ratings of 5 dimensions. Every figure is recomputed here: raw
agreement by hand, AC1 written out with numpy (irrCAC's two-rater formula), Cohen's kappa by
scikit-learn, the consensus, the selection rule, and the splits recounted from the records."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from converse_stub import ConverseScript
from rubrics import write_tsv
from sklearn.metrics import cohen_kappa_score

from carebench.cli import main
from stub_server import StubServer

DIMS = ["D1", "D2", "D3", "D4", "D5"]
#: per dimension: a Red question ("Yes" rates High Potential for Harm and skips the next), then
#: a Yellow one ("Yes" rates Suboptimal); both "No" rate Best Practice
RUBRIC = [row for i, d in enumerate(DIMS) for row in (
    [str(2 * i + 1), d, "Red", "", f"{d} harm?", "", "", "", ""],
    [str(2 * i + 2), d, "Yellow", "", f"{d} weak?", "", "", "", ""])]
NAMES = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet",
         "Kilo", "Lima"]
CHATBOT = {n: ("bot-x" if i % 2 == 0 else "bot-y") for i, n in enumerate(NAMES)}
RISK = {n: ("high" if i < 4 else "low" if i < 8 else "none") for i, n in enumerate(NAMES)}
BAND = {"B": "Best Practice", "S": "Suboptimal but Low Potential for Harm", "H": "High Potential for Harm",
        "N": "Not Relevant"}
CODE = {c: i for i, c in enumerate("BSHN")}  # the bands' order
#: hand-written: per clinician, per conversation, the five dimensions' bands
CLIN = {
    "cl1": ["BBSHB", "BSBBB", "HBBSN", "BBBBB", "SSBHB", "BBHBB", "BNBBS", "HHBBB", "BBSBB", "SBBBH",
            "BBBNB", "BHBSB"],
    "cl2": ["BBSHB", "BSBBS", "HBBSN", "BBBBB", "SBBHB", "BBHBB", "BNBBS", "HHBSB", "BBSBB", "SBBBH",
            "BBBBB", "BHBSB"],
    "cl3": ["BBSHS", "BSBBB", "HBSSN", "BSBBB", "SSBHB", "BBHBH", "BBBBS", "HHBBB", "BBBBB", "SBBBH",
            "BBBNB", "HHBSB"],
}
JUDGES = ("judge-a", "judge-b", "judge-c")


def _judge_band(judge, i):
    """The known rule each scripted judge follows, per conversation i: five bands."""
    if judge == "judge-a":  # clinician 1, but it cannot say Not Relevant: Best Practice instead
        return CLIN["cl1"][i].replace("N", "B")
    if judge == "judge-b":  # always Best Practice
        return "BBBBB"
    base = CLIN["cl2"][i].replace("N", "B")  # judge-c: clinician 2, Harm and Best swapped on bot-y
    return base if CHATBOT[NAMES[i]] == "bot-x" else base.translate(str.maketrans("HB", "BH"))


def _script():
    s = ConverseScript()
    for j in JUDGES:
        for i, n in enumerate(NAMES):
            for d, band in zip(DIMS, _judge_band(j, i)):
                s.answers[(j, n, f"{d} harm?")] = "Yes" if band == "H" else "No"
                s.answers[(j, n, f"{d} weak?")] = "Yes" if band == "S" else "No"
    return s


def _transcripts(tmp_path):
    rows = [{"id": f"c{i:02d}", "persona": n, "risk_level": RISK[n], "chatbot": CHATBOT[n],
             "messages": [{"role": "user", "content": f"[{n}] message 1"},
                          {"role": "assistant", "content": "a reply"}]} for i, n in enumerate(NAMES)]
    p = tmp_path / "logs.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _labels(tmp_path):
    lines = []
    for cl, convs in CLIN.items():
        for i, bands in enumerate(convs):
            common = {"clinician": cl, "conversation_id": f"c{i:02d}", "chatbot": CHATBOT[NAMES[i]],
                      "persona": NAMES[i], "risk_level": RISK[NAMES[i]], "reason": ""}
            step = 0
            for k, (d, b) in enumerate(zip(DIMS, bands)):
                step += 1
                lines.append({**common, "record": "answer", "step": step, "question_id": str(2 * k + 1),
                              "dimension": d, "answer": "Yes" if b == "H" else "No"})
                if b != "H":
                    step += 1
                    lines.append({**common, "record": "answer", "step": step, "question_id": str(2 * k + 2),
                                  "dimension": d, "answer": "Yes" if b == "S" else "No"})
            for d, b in zip(DIMS, bands):
                lines.append({**common, "record": "rating", "dimension": d, "rating": BAND[b]})
    p = tmp_path / "labels.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return p


def ac1_ref(a, b, q=4):
    """Gwet's AC1 for two raters (irrCAC's gwet.ac1.raw), written out."""
    a, b = np.asarray(a), np.asarray(b)
    pa = np.mean(a == b)
    pi = np.array([(np.sum(a == k) + np.sum(b == k)) / (2 * len(a)) for k in range(q)])
    pe = np.sum(pi * (1 - pi)) / (q - 1)
    return (pa - pe) / (1 - pe)


def _consensus(i, d):
    votes = [CLIN[c][i][d] for c in CLIN]
    top = max(set(votes), key=votes.count)
    return top if votes.count(top) >= 2 else None


def _label(m, j):
    """The recorded label of scripted judge j (its full spec)."""
    (lab,) = [k for k in m["judges"] if k.startswith(f"openai:{j}@")]
    return lab


def _figures(judge, idx, d):
    """(judge codes, consensus codes) over conversations idx for dimension d, consensus required."""
    a, b = [], []
    for i in idx:
        c = _consensus(i, d)
        if c is not None:
            a.append(CODE[_judge_band(judge, i)[d]])
            b.append(CODE[c])
    return a, b


def _run(tmp_path, stub, *extra):
    out = tmp_path / "calib"
    code = main(["converse", "calibrate", "--labels", str(_labels(tmp_path)),
                 "--transcripts", str(_transcripts(tmp_path)), "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)),
                 *[a for j in JUDGES for a in ("--candidate", f"openai:{j}@{stub.base_url}")],
                 "--bootstrap", "40", "--seed", "7", "--cache", str(tmp_path / "c.sqlite"), "--out", str(out),
                 *extra])
    return code, out


def test_calibrate_figures_and_selection(tmp_path):
    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub)
        assert code == 0
        n_calls = len(stub.requests)
    # every call went to a judge; per judge and conversation: one per Red question, plus one per
    # Yellow question reached (the Red answer was No)
    expected_calls = sum(1 + (b != "H") for j in JUDGES for i in range(12) for b in _judge_band(j, i))
    assert n_calls == expected_calls
    m = json.loads((out / "metrics.json").read_text())
    assert m["conversations"] == 12 and m["clinicians"] == ["cl1", "cl2", "cl3"]
    all_idx = range(12)
    means = {}
    for j in JUDGES:
        f = m["judges"][_label(m, j)]
        ac1s, raws = [], []
        for d in range(5):
            a, b = _figures(j, all_idx, d)
            got = f["dimensions"][DIMS[d]]
            assert got["n"] == len(a)
            assert got["raw"] == pytest.approx(sum(x == y for x, y in zip(a, b)) / len(a))
            assert got["ac1"] == pytest.approx(ac1_ref(a, b))
            k = cohen_kappa_score(a, b, labels=[0, 1, 2, 3])
            assert (got["kappa"] is None and np.isnan(k)) or got["kappa"] == pytest.approx(k)
            ac1s.append(ac1_ref(a, b))
            raws.append(got["raw"])
            # confusion: rows = consensus band, columns = the judge's
            cm = np.zeros((4, 4), int)
            for x, y in zip(a, b):
                cm[y, x] += 1
            assert f["confusion"][DIMS[d]] == cm.tolist()
            # against each clinician
            for cl in CLIN:
                a2 = [CODE[_judge_band(j, i)[d]] for i in all_idx]
                b2 = [CODE[CLIN[cl][i][d]] for i in all_idx]
                assert f["clinicians"][cl][DIMS[d]]["ac1"] == pytest.approx(ac1_ref(a2, b2))
                assert f["clinicians"][cl][DIMS[d]]["kappa"] == pytest.approx(
                    cohen_kappa_score(a2, b2, labels=[0, 1, 2, 3]))
        means[j] = (float(np.mean(ac1s)), float(np.mean(raws)))
        assert f["mean"]["ac1"] == pytest.approx(means[j][0])
        lo, hi = f["mean_ac1_ci"]
        assert lo <= hi
        # splits by chatbot and risk level, recounted from the judging run's records
        recs = [json.loads(x) for x in (out / "judging" / "records.jsonl").read_text().splitlines()]
        convs = {r["id"]: r for r in recs if r["kind"] == "conversation"}
        for split, key in (("chatbot", "chatbot"), ("risk_level", "risk_level")):
            groups = {}
            for i in all_idx:
                groups.setdefault(convs[f"c{i:02d}"][key], []).append(i)
            assert set(f["splits"][split]) == set(groups)
            for g, idx in groups.items():
                vals = [ac1_ref(*_figures(j, idx, d)) for d in range(5) if _figures(j, idx, d)[0]]
                assert f["splits"][split][g]["conversations"] == len(idx)
                assert f["splits"][split][g]["mean"]["ac1"] == pytest.approx(np.mean(vals))
        # borderline (clinicians disagree on any dimension) vs clear conversations
        border = [i for i in all_idx if len({CLIN[c][i] for c in CLIN}) > 1]
        clear = [i for i in all_idx if i not in border]
        for g, idx in (("borderline", border), ("clear", clear)):
            vals = [ac1_ref(*_figures(j, idx, d)) for d in range(5) if _figures(j, idx, d)[0]]
            assert f["splits"]["borderline"][g]["mean"]["ac1"] == pytest.approx(np.mean(vals))
        # leave one clinician out: the other two's consensus needs both to agree
        for cl in CLIN:
            others = [c for c in CLIN if c != cl]
            vals_j, vals_c = [], []
            for d in range(5):
                keep = [i for i in all_idx if CLIN[others[0]][i][d] == CLIN[others[1]][i][d]]
                ref = [CODE[CLIN[others[0]][i][d]] for i in keep]
                vals_j.append(ac1_ref([CODE[_judge_band(j, i)[d]] for i in keep], ref))
                vals_c.append(ac1_ref([CODE[CLIN[cl][i][d]] for i in keep], ref))
            loo = f["leave_one_clinician_out"][cl]
            assert loo["judge"]["ac1"] == pytest.approx(np.mean(vals_j))
            assert loo["clinician"]["ac1"] == pytest.approx(np.mean(vals_c))
        # per question: the Red question of D1 is reached by both on every conversation
        q = f["questions"]["questions"]["1"]
        agree = [(_judge_band(j, i)[0] == "H") == (CLIN[cl][i][0] == "H") for cl in CLIN for i in all_idx]
        assert q["n"] == 36 and q["raw"] == pytest.approx(np.mean(agree))
    # intervals: 40 resamples of the 12 conversations, default_rng(seed 7), percentiles 2.5/97.5
    idx = np.random.default_rng(7).integers(0, 12, size=(40, 12))
    f = m["judges"][_label(m, "judge-a")]
    for d in (0, 2):
        vals = {"raw": [], "ac1": [], "kappa": []}
        for row in idx:
            a, b = _figures("judge-a", list(row), d)
            vals["raw"].append(np.mean(np.array(a) == np.array(b)))
            vals["ac1"].append(ac1_ref(a, b))
            with warnings.catch_warnings():  # a resample where kappa is undefined (NaN) says so
                warnings.simplefilter("ignore")
                vals["kappa"].append(cohen_kappa_score(a, b, labels=[0, 1, 2, 3]))
        for k, v in vals.items():
            v = np.array(v, float)
            v = v[~np.isnan(v)]
            assert f["dimensions"][DIMS[d]][f"{k}_ci"] == pytest.approx(list(np.percentile(v, [2.5, 97.5])))
    # paths: judge-b walks every question; a clinician's walk parts from it at the first dimension
    # rated Harm (its Red question, the last one both asked)
    paths = m["judges"][_label(m, "judge-b")]["questions"]["paths"]
    parted = {}
    for cl in CLIN:
        for i in all_idx:
            if "H" in CLIN[cl][i]:
                q = str(2 * CLIN[cl][i].index("H") + 1)
                parted[q] = parted.get(q, 0) + 1
    assert paths["pairs"] == 36 and paths["diverged"] == sum(parted.values())
    assert paths["first_divergence"] == parted
    # the ceiling: every pair of clinicians, pooled
    for d in range(5):
        a = [CODE[CLIN[x][i][d]] for x, y in (("cl1", "cl2"), ("cl1", "cl3"), ("cl2", "cl3")) for i in all_idx]
        b = [CODE[CLIN[y][i][d]] for x, y in (("cl1", "cl2"), ("cl1", "cl3"), ("cl2", "cl3")) for i in all_idx]
        assert m["ceiling"]["dimensions"][DIMS[d]]["ac1"] == pytest.approx(ac1_ref(a, b))
    # borderline: clinicians disagreeing on any dimension
    assert m["borderline"] == sum(len({CLIN[c][i] for c in CLIN}) > 1 for i in all_idx)
    # the selection by hand: mean AC1 vs consensus, each chatbot's mean at least 0.4
    def per_bot_ok(j):
        for bot in ("bot-x", "bot-y"):
            idx = [i for i in all_idx if CHATBOT[NAMES[i]] == bot]
            if np.mean([ac1_ref(*_figures(j, idx, d)) for d in range(5)]) < 0.4:
                return False
        return True
    eligible = [j for j in JUDGES if per_bot_ok(j)]
    chosen = max(eligible, key=lambda j: (means[j][0], means[j][1]))
    sel = json.loads((out / "selection.json").read_text())
    assert sel["judge"] == m["selection"]["judge"] == _label(m, chosen)
    assert "judge-c" not in eligible and _label(m, "judge-c") in sel["excluded"]  # the swap on bot-y sinks it
    assert sel["spec"].startswith(f"openai:{chosen}@")
    # the page opens with the decision: the selected judge and its mean AC1 (by hand above)
    page = (out / "report.html").read_text()
    head = page[page.index('<div class="headline"'):page.index("</header>")]
    assert f"Selected judge: {_label(m, chosen)}" in head
    assert f"{means[chosen][0]:.3f} [" in head and f"(n = {m['conversations']} conversations)" in head
    assert "> [!IMPORTANT]" in (out / "report.md").read_text()


def test_judge_from_records_the_selection(tmp_path):
    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub)
        assert code == 0
        sel = json.loads((out / "selection.json").read_text())
        run2 = tmp_path / "run2"
        assert main(["converse", "judge", "--transcripts", str(tmp_path / "logs.jsonl"), "--rubric",
                     str(tmp_path / "r.tsv"), "--judge-from", str(out), "--bootstrap", "20",
                     "--cache", str(tmp_path / "c.sqlite"), "--out", str(run2)]) == 0
    recs = [json.loads(x) for x in (run2 / "records.jsonl").read_text().splitlines()]
    assert {r["judge"] for r in recs if r["kind"] == "walk"} == {sel["judge"]}
    manifest = json.loads((run2 / "manifest.json").read_text())
    text = json.dumps(manifest)
    assert str(out) in text and "selection_sha256" in text


@pytest.mark.parametrize("content", ["not json\n", '{"record": "rating", "clinician": "a"}\n',
                                     ('{"record": "rating", "clinician": "a", "conversation_id": "c00", '
                                     '"dimension": "D1", "rating": "Great"}\n')])
def test_bad_labels_one_line_exit_2(tmp_path, capsys, content):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    with StubServer() as stub:
        stub.handler = _script()
        code = main(["converse", "calibrate", "--labels", str(bad), "--transcripts", str(_transcripts(tmp_path)),
                     "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)), "--candidate",
                     f"openai:judge-a@{stub.base_url}", "--no-cache", "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_dry_run_makes_no_call_and_writes_nothing(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub, "--dry-run")
        assert code == 0
        assert stub.requests == []
    assert not (out / "metrics.json").exists() and not (out / "selection.json").exists()
    assert "judge" in capsys.readouterr().out.lower()


def test_calibrate_from_a_run_directory(tmp_path):
    """--run RUN_DIR: the conversations of an earlier run (here one written by converse judge)."""
    with StubServer() as stub:
        stub.handler = _script()
        first = tmp_path / "first"
        assert main(["converse", "judge", "--transcripts", str(_transcripts(tmp_path)), "--rubric",
                     str(write_tsv(tmp_path / "r.tsv", RUBRIC)), "--judge", f"openai:judge-b@{stub.base_url}",
                     "--bootstrap", "10", "--cache", str(tmp_path / "c.sqlite"), "--out", str(first)]) == 0
        out = tmp_path / "calib"
        assert main(["converse", "calibrate", "--labels", str(_labels(tmp_path)), "--run", str(first),
                     "--rubric", str(tmp_path / "r.tsv"), "--candidate", f"openai:judge-a@{stub.base_url}",
                     "--bootstrap", "10", "--cache", str(tmp_path / "c.sqlite"), "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    (lab,) = m["judges"]
    a, b = _figures("judge-a", range(12), 0)
    assert m["judges"][lab]["dimensions"]["D1"]["ac1"] == pytest.approx(ac1_ref(a, b))


def test_consensus_rules_by_hand():
    from carebench.converse.calibration import consensus

    bp, sub, hph = BAND["B"], BAND["S"], BAND["H"]
    assert consensus({"a": bp, "b": bp, "c": hph}) == bp
    assert consensus({"a": bp, "b": hph}) is None  # a tie is no consensus
    assert consensus({"a": bp, "b": sub, "c": hph}) is None
    assert consensus({"a": bp, "b": bp, "c": hph}, "unanimous") is None
    assert consensus({"a": sub, "b": sub}, "unanimous") == sub


def test_unknown_consensus_rule_one_line_exit_2(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = _script()
        code, _ = _run(tmp_path, stub, "--consensus", "plurality")
        assert stub.requests == []
    assert code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_calibration_directory_is_a_run_carebench_report_rerenders_from_its_own_records(tmp_path, capsys):
    """The calibration directory holds the clinicians' labels and the judges' walks as its
    records: with the labels file and the judging run gone, ``carebench report`` recomputes the
    same figures; compare refuses it in one line; a second calibrate into it is served from the
    cache, and a folder holding anything else is still refused."""
    import shutil

    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub)
        assert code == 0
        first = json.loads((out / "metrics.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        assert (manifest["suite"], manifest["kind"], manifest["status"]) == ("converse", "calibration", "complete")
        recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
        labels = [json.loads(x) for x in _labels(tmp_path).read_text().splitlines()]
        kept = [r["label"] for r in recs if r["kind"] == "label"]
        assert len(kept) == len(labels) and all(lab.items() <= k.items() for lab, k in zip(labels, kept, strict=True))
        judged = [json.loads(x) for x in (out / "judging" / "records.jsonl").read_text().splitlines()]
        assert [r for r in recs if r["kind"] == "walk"] == [r for r in judged if r["kind"] == "walk"]
        n = len(stub.requests)
        assert _run(tmp_path, stub)[0] == 0 and len(stub.requests) == n  # again into it: every call cached
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "judging").mkdir()
        (tmp_path / "other" / "notes.txt").write_text("mine")
        capsys.readouterr()
        assert main(["converse", "calibrate", "--labels", str(_labels(tmp_path)), "--transcripts",
                     str(_transcripts(tmp_path)), "--rubric", str(tmp_path / "r.tsv"), "--candidate",
                     f"openai:judge-a@{stub.base_url}", "--out", str(tmp_path / "other")]) == 2
        assert "is not a carebench run directory" in capsys.readouterr().err
        assert len(stub.requests) == n
    shutil.rmtree(out / "judging")
    _labels(tmp_path).unlink()
    (out / "metrics.json").unlink()
    assert main(["report", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text()) == first
    assert "Selected judge:" in (out / "report.html").read_text()
    capsys.readouterr()
    assert main(["compare", str(out), str(out), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a converse calibration run" in err[0]


@pytest.mark.parametrize("floor", ["nan", "inf", "1.5", "-2"])
def test_a_floor_outside_the_coefficients_range_is_one_line_before_any_call(tmp_path, capsys, floor):
    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub, "--floor", floor)
        assert stub.requests == []
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--floor must be a number from -1 to 1" in err[0]


def test_labels_the_rubric_cannot_give_are_refused_and_transcripts_are_not_illustrative(tmp_path, capsys):
    """A clinician's answer to a question the rubric has not, or an answer the question cannot
    take, would be scored as a disagreement: one line naming the labels file, nothing written
    beside the judging run. The judging run over the user's own transcripts carries no
    illustrative-data banner."""
    good = _labels(tmp_path).read_text().splitlines()
    rows = [json.loads(x) for x in good]
    k = next(i for i, r in enumerate(rows) if r["record"] == "answer" and not r.get("auto"))
    for change, message in (({"question_id": "99"}, "question '99' is not in the rubric"),
                            ({"answer": "Maybe"}, "answered 'Maybe', not one of its answers")):
        bad = tmp_path / "bad.jsonl"
        bad.write_text("".join(json.dumps({**r, **change} if i == k else r) + "\n" for i, r in enumerate(rows)))
        out = tmp_path / f"calib-{change.popitem()[0]}"
        with StubServer() as stub:
            stub.handler = _script()
            code = main(["converse", "calibrate", "--labels", str(bad), "--transcripts", str(_transcripts(tmp_path)),
                         "--rubric", str(write_tsv(tmp_path / "r.tsv", RUBRIC)), "--candidate",
                         f"openai:judge-a@{stub.base_url}", "--bootstrap", "10", "--cache",
                         str(tmp_path / "c.sqlite"), "--out", str(out)])
        assert code == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]
        assert len(err) == 1 and str(bad) in err[0] and message in err[0], err
        assert sorted(p.name for p in out.iterdir()) == ["judging"]
        assert json.loads((out / "judging" / "manifest.json").read_text())["dataset"]["illustrative"] is False


def test_converse_score_refuses_a_calibration_directory(tmp_path, capsys):
    with StubServer() as stub:
        stub.handler = _script()
        code, out = _run(tmp_path, stub)
    assert code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for cmd in (["converse", "score", str(out)], ["converse", "rescore", str(out)]):
        capsys.readouterr()
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is a converse calibration run" in err[0]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
