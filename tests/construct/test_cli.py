"""construct commands: one-line errors, dry runs, and the review round trip through the sheets."""

from __future__ import annotations

import json

import pytest
from rerender_check import assert_report_reproduces

from carebench.cli import main
from carebench.construct.io import write_models
from carebench.construct.sources import Persona, Proxy, WorkRow
from carebench.datasets.sheets import load_review_items
from carebench.engine.rundir import read_json, read_jsonl


def _err(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    return rc, err


def test_bad_source_row_names_file_line_field(tmp_path, capsys):
    p = tmp_path / "src.jsonl"
    p.write_text('{"id": "a", "text": "ok", "source": "s"}\n{"id": "b", "text": "", "source": "s"}\n', "utf-8")
    rc, err = _err(capsys, ["construct", "screen", "--sources", str(p), "--out", str(tmp_path / "o")])
    assert rc == 2 and f"{p}: line 2: field 'text'" in err and "Traceback" not in err


def test_unknown_classifier_and_config_key(tmp_path, capsys):
    rc, err = _err(capsys, ["construct", "screen", "--classifier", "magic", "--out", str(tmp_path / "o")])
    assert rc == 2 and "unknown classifier 'magic'" in err
    cfg = tmp_path / "b.yaml"
    cfg.write_text("rewriter: [x]\n", "utf-8")
    rc, err = _err(capsys, ["construct", "build", "--config", str(cfg)])
    assert rc == 2 and "rewriter" in err and "Extra inputs" in err


def test_build_needs_models_and_dry_run_makes_no_call(tmp_path, capsys):
    rc, err = _err(capsys, ["construct", "build"])
    assert rc == 2 and "no model for router, judge, rewriters" in err
    rc = main(["construct", "build", "--model", "openai:m@http://127.0.0.1:9/v1", "--dry-run", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert rc == 0 and plan["suite"] == "construct" and plan["upper_bound"]
    assert [s["name"] for s in plan["stages"]][:2] == ["persona sketches", "persona picks"]


def test_screen_lexicon_only(tmp_path):
    assert main(["construct", "screen", "--keep-share", "0", "--out", str(tmp_path / "s")]) == 0
    kept = read_jsonl(tmp_path / "s" / "screened.jsonl")
    assert kept and all(r["screen_reason"] == "lexicon" and r["lexicon_hits"] for r in kept)
    texts = {r["id"]: r["text"] for r in kept}
    assert "src-019" not in texts  # the hawker-food post has no lexicon term
    assert "src-008" not in texts  # "killing me" about an exam paper: no lexicon term


def test_review_round_trip(tmp_path):
    rows = []
    pop = {("counselor_chat", "m1"): 6, ("triage", "m1"): 12, ("counselor_chat", "m2"): 9, ("triage", "m2"): 3}
    for (ctx, rw), n in pop.items():
        for i in range(n):
            rows.append(WorkRow(id=f"{ctx}-{rw}-{i}", text=f"source text {i}", source="s", context=ctx, rewriter=rw,
                                output=f"rewritten text {i}", persona=Persona(id="p", text="persona"),
                                proxy=Proxy(intent=["INTENT_1"])))
    write_models(tmp_path / "rows.jsonl", rows)
    assert main(["construct", "review-sample", "--rows", str(tmp_path / "rows.jsonl"), "--total", "12",
                 "--per-reviewer", "8", "--shared", "4", "--reviewer", "ann", "--reviewer", "bob",
                 "--out", str(tmp_path / "rs")]) == 0
    key = read_jsonl(tmp_path / "rs" / "review_key.private.jsonl")
    sheets = {who: load_review_items(tmp_path / "rs" / f"review_{who}.jsonl") for who in ("ann", "bob")}
    assert len(sheets["ann"]) == 8 and len(sheets["bob"]) == 8 and len(key) == 12
    combined = load_review_items(tmp_path / "rs" / "review_sheet.jsonl")  # what `annotate load` reads
    assert sorted((r.item_id, r.reviewer) for r in combined) == sorted(
        (r.item_id, r.reviewer) for who in ("ann", "bob") for r in sheets[who])
    assert "rewriter" not in (tmp_path / "rs" / "review_sheet.jsonl").read_text("utf-8")
    # script: ann fails severity on every item of cell triage|m1; bob rates everything 4, ann 2
    cell = {k["item_id"]: k["cell"] for k in key}
    reviews = {}
    for who, items in sheets.items():
        reviews[who] = tmp_path / f"{who}.jsonl"
        reviews[who].write_text("".join(json.dumps({
            "item_id": it.item_id, "reviewer": who,
            "severity_preserved": "no" if (who == "ann" and cell[it.item_id] == "triage|m1") else "yes",
            "no_leakage": "yes", "format_ok": "yes", "factual": 2 if who == "ann" else 4, "persona_fit": 3,
            "style": 3, "context_fit": 3, "naturalness": 3}) + "\n" for it in items), "utf-8")
    assert main(["construct", "review-stats", "--key", str(tmp_path / "rs" / "review_key.private.jsonl"),
                 "--reviews", str(reviews["ann"]), "--reviews", str(reviews["bob"]), "--bootstrap", "200",
                 "--out", str(tmp_path / "st")]) == 0
    est = read_json(tmp_path / "st" / "metrics.json")["review"]["estimates"]
    for d in ("rs", "st"):
        assert_report_reproduces(tmp_path / d, tmp_path / f"{d}-copy")
    # by hand from the key: weight N/n per cell; severity fails where ann reviewed a triage|m1 item
    w = {k["item_id"]: k["weight"] for k in key}
    ann_items = {k["item_id"] for k in key if "ann" in k["reviewers"]}
    fails = sum(w[i] for i in w if cell[i] == "triage|m1" and i in ann_items)
    assert est["fail_severity"]["estimate"] == pytest.approx(fails / sum(w.values()))
    factual = {i: (2 if i in ann_items else 0) + (4 if "bob" in next(k for k in key if k["item_id"] == i)["reviewers"] else 0)
               for i in w}
    n_rev = {k["item_id"]: len(k["reviewers"]) for k in key}
    expect = sum(w[i] * factual[i] / n_rev[i] for i in w) / sum(w.values())
    assert est["factual"]["estimate"] == pytest.approx(expect)
    assert est["fail_severity"]["lo"] <= est["fail_severity"]["estimate"] <= est["fail_severity"]["hi"]


def test_screen_with_a_score_file(tmp_path):
    """scores:PATH: >= 0.5 retained, [0.3, 0.5) uncertain, below hard negative, missing uncertain;
    with keep-share 1 every candidate stays and the reason says which kind it was."""
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t, "source": "s"}) + "\n" for i, t in
                           [("a", "plain words one"), ("b", "plain words two"), ("c", "plain words three"),
                            ("d", "plain words four"), ("e", "I relapsed on sh")]), "utf-8")
    scores = tmp_path / "scores.csv"
    scores.write_text("id,score,intent\na,0.9,INTENT_1\nb,0.4,\nc,0.1,INTENT_0\ne,0.0,\n", "utf-8")
    assert main(["construct", "screen", "--sources", str(src), "--classifier", f"scores:{scores}",
                 "--keep-share", "1", "--out", str(tmp_path / "s")]) == 0
    got = {r["id"]: r["screen_reason"] for r in read_jsonl(tmp_path / "s" / "screened.jsonl")}
    assert got == {"a": "classifier", "b": "uncertain", "c": "hard_negative", "d": "uncertain", "e": "lexicon"}
    assert main(["construct", "screen", "--sources", str(src), "--classifier", f"scores:{scores}",
                 "--keep-share", "0", "--out", str(tmp_path / "s0")]) == 0
    assert {r["id"] for r in read_jsonl(tmp_path / "s0" / "screened.jsonl")} == {"a", "e"}
