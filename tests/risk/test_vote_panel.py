"""The vote's panel is three models under one clinical prompt by default (issue 10, item 1)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from carebench.engine.rundir import read_jsonl
from carebench.risk.cli import app
from stub_server import StubServer

ANSWER = {"m1": "b", "m2": "c", "m3": "c"}


def _run(args):
    return CliRunner().invoke(app, args, catch_exceptions=True)


def test_three_models_are_the_voters_under_the_clinical_prompt(tmp_path):
    systems = []

    def handler(req):
        systems.append(req.body["messages"][0]["content"])
        return ANSWER.get(req.body["model"], "a")

    with StubServer() as stub:
        stub.handler = handler
        models = [f"openai:{m}@{stub.base_url}" for m in ANSWER]
        base = ["run", "--data", "builtin:sample", "--bootstrap", "20", "--no-cache"]
        flags = [x for m in models for x in ("--model", m)]
        res = _run([*base, "--method", "vote", *flags,
                    "--out", str(tmp_path / "three")])
        assert res.exit_code == 0, repr(res.exception)
        n_three = len(stub.requests)
        one = _run([*base, "--method", "tfidf-lr", "--method", "vote", "--model", models[0],
                    "--out", str(tmp_path / "one")])
        n_after_one = len(stub.requests)
        variants = _run([*base, "--method", "vote:voters=variants", "--model", models[0],
                         "--out", str(tmp_path / "variants")])
        assert variants.exit_code == 0, repr(variants.exception)
    # 48 items x 3 models, every request with the same (clinical) system prompt
    assert n_three == 3 * 48 and len(set(systems[:n_three])) == 1
    recs = read_jsonl(tmp_path / "three" / "records.jsonl")
    assert {r["method"] for r in recs} == {"vote"}
    assert all(r["pred"] == 2 for r in recs)  # b, c, c -> c by majority
    panel = recs[0]["detail"]["panel"]
    assert panel["kind"] == "models" and panel["members"] == models
    md = (tmp_path / "three" / "report.md").read_text()
    assert "vote: voters are 3 models under the clinical prompt" in md
    # one model and no panel named: an error, not a silent variant panel
    assert one.exit_code != 0 and "pass --model three times" in str(one.exception)
    assert n_after_one == n_three  # the refused run made no call at all
    assert not (tmp_path / "one").exists()
    vmd = (tmp_path / "variants" / "report.md").read_text()
    assert "voters are the prompt variants clinical, conservative, contextual on one model" in vmd


def test_config_models_list_is_the_panel_and_single_methods_run_on_each(tmp_path):
    with StubServer() as stub:
        stub.handler = lambda req: ANSWER.get(req.body["model"], "a")
        cfg = tmp_path / "c.yaml"
        cfg.write_text("data: builtin:sample\nbootstrap: 20\nmodels:\n" + "".join(
            f"  - openai:{m}@{stub.base_url}\n" for m in ANSWER) + "methods: [vote, llm]\n")
        res = _run(["run", "--config", str(cfg), "--no-cache", "--out", str(tmp_path / "r")])
        assert res.exit_code == 0, repr(res.exception)
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert "vote" in metrics["methods"]
    assert sum(name.startswith("llm@") for name in metrics["methods"]) == 3
    assert metrics["methods"]["vote"]["panel"]["kind"] == "models"
