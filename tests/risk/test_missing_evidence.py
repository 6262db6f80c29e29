"""Missing evidence is said, never filled in (issue 10, item 6)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from stub_server import StubReply, StubServer

PROFILE = {
    "ideation_presence": 2, "plan_specificity": 1, "temporality": 1, "prior_attempts": 0,
    "hopelessness": 2, "protective_factors": 1, "third_party_context": 0, "linguistic_urgency": 1,
}


def _run(args):
    res = CliRunner().invoke(app, args, catch_exceptions=True)
    assert res.exit_code == 0, repr(res.exception)
    return res


def _data(tmp_path, n=8, per_level=None):
    levels = per_level or [i % 4 for i in range(n)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"id": f"i{i}", "text": f"post number {i}", "level": lvl})
                            + "\n" for i, lvl in enumerate(levels)))
    return path


def test_schema_calibrated_without_scores_is_a_warning_in_metrics_and_report(tmp_path):
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content=json.dumps(PROFILE))
        _run(["run", "--data", str(_data(tmp_path)), "--method", "schema-calibrated",
              "--model", f"openai:stub@{stub.base_url}", "--out", str(tmp_path / "r"),
              "--bootstrap", "50", "--no-cache"])
    e = json.loads((tmp_path / "r" / "metrics.json").read_text())["methods"]["schema-calibrated"]
    [(text, count)] = e["warnings"].items()
    assert "no moderation scores" in text and count == 8
    md = (tmp_path / "r" / "report.md").read_text()
    warnings = md[md.index("## Warnings"): md.index("## Run")]
    assert "schema-calibrated: no moderation scores" in warnings and "on 8 of 8 items" in warnings


def test_moderation_response_missing_a_category_is_an_error_for_that_item(tmp_path):
    full = {"self-harm": 0.5, "self-harm/intent": 0.2, "self-harm/instructions": 0.0}
    partial = {k: v for k, v in full.items() if k != "self-harm/intent"}

    def body(scores):
        return json.dumps({"id": "m", "model": "omni-moderation-latest",
                           "results": [{"flagged": False, "category_scores": scores}]})

    with StubServer() as stub:
        stub.on_text("number 3", StubReply(raw_body=body(partial)))
        stub.handler = lambda req: StubReply(raw_body=body(full))
        _run(["run", "--data", str(_data(tmp_path)), "--method", "moderation-fixed",
              "--moderation-model", f"openai-moderation:omni-moderation-latest@{stub.base_url}",
              "--out", str(tmp_path / "r"), "--bootstrap", "50", "--no-cache"])
    recs = {r["item_id"]: r for r in read_jsonl(tmp_path / "r" / "records.jsonl")}
    assert recs["i3"]["status"] == "error" and recs["i3"]["pred"] is None
    assert "self-harm/intent" in recs["i3"]["detail"]["error"]
    # max(0.5, 0.2) = 0.5 lies in [0.35, 0.70): Behavior for every other item
    assert all(r["pred"] == 2 for k, r in recs.items() if k != "i3")


def test_the_report_prints_the_number_of_folds_actually_used(tmp_path):
    # three items per level: scikit-learn's stratified K-fold can use at most 3 folds
    _run(["run", "--data", str(_data(tmp_path, per_level=[0, 1, 2, 3] * 3)), "--method",
          "tfidf-lr", "--out", str(tmp_path / "r"), "--bootstrap", "50"])
    recs = read_jsonl(tmp_path / "r" / "records.jsonl")
    assert {r["detail"]["fold"] for r in recs} == {0, 1, 2}
    md = (tmp_path / "r" / "report.md").read_text()
    assert "stratified 5-fold" not in md
    assert "stratified 3-fold out-of-fold predictions (5 requested" in md
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["methods"]["tfidf-lr"]["n_folds"] == 3
