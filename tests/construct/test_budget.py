"""The construct pipeline's budget is the run's (issue 9): against the stub at $1 a call,
``--budget 5`` at concurrency 4 makes at most 5 + 4 calls, exits 3 with the run's one
stop line and marks the step it cut short incomplete; re-running without the budget
finishes with no request sent twice, and the per-stage figures match the call log
and the stub's own count of what it was asked."""

from __future__ import annotations

import json
from collections import Counter

import yaml
from construct_stub import Pipeline
from rerender_check import assert_report_reproduces

from carebench.cli import main
from carebench.engine.rundir import read_json, read_jsonl
from stub_server import StubServer

MODELS = ("router", "judge", "good", "plain")
#: the stub's name for each batch's task (from its system prompt, not from carebench's stage names)
KIND = {"persona sketches": "sketch", "persona picks": "pick", "selection rewrites": "rewrite",
        "rewrites": "rewrite", "selection judge": "judge", "construction judge": "judge"}


def _config(tmp_path, url):
    m = lambda name: f"openai:{name}@{url}"
    cfg = {"router": m("router"), "judge": m("judge"), "rewriters": [m("good"), m("plain")],
           "embedder": "hashing", "selection_sample": 4, "figures": False}
    p = tmp_path / "build.yaml"
    p.write_text(yaml.safe_dump(cfg), "utf-8")
    return p


def _stop_lines(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("carebench:")]


def test_build_budget_stop_then_resume(tmp_path, capsys, price_per_call):
    price_per_call(1.0, *MODELS)
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = handler = Pipeline()
        args = ["construct", "build", "--config", str(_config(tmp_path, stub.base_url)), "--limit", "20",
                "--concurrency", "4", "--out", str(out), "--cache", str(tmp_path / "c.sqlite")]
        assert main([*args, "--budget", "5"]) == 3
        err = _stop_lines(capsys)
        assert len(err) == 1 and "budget of $5.00 reached: spent $5.00 on 5 calls; at least" in err[0], err
        assert "resume" in err[0]
        first = [r.raw for r in stub.requests]
        assert 1 <= len(first) <= 5 + 4

        manifest = read_json(out / "manifest.json")
        metrics = read_json(out / "metrics.json")
        # screening made no call and finished; routing's sketches were cut short
        assert manifest["status"] == "incomplete" and manifest["incomplete"] == ["route"]
        assert metrics["incomplete"] == ["route"] and metrics["stopped_batch"] == "persona sketches"
        assert [s["step"] for s in metrics["stages"]] == ["screen"]
        assert metrics["accounting"]["spent_usd"] == len(first) * 1.0
        assert not (out / "prompts.jsonl").exists() and not (out / "rows.jsonl").exists()
        report = (out / "report.md").read_text("utf-8")
        assert "incomplete" in report and "during route" in report
        stopped_calls = read_jsonl(out / "calls.jsonl")
        assert len(stopped_calls) == len(first)  # only answered calls are logged
        assert_report_reproduces(out, tmp_path / "stopped-copy")  # a stopped run re-renders too

        asked = Counter(handler.calls)
        assert main(args) == 0  # the same command without --budget
        bodies = [r.raw for r in stub.requests]
        resumed = Counter(handler.calls) - asked

    assert len(bodies) == len(set(bodies))  # no request was sent twice over both runs
    manifest = read_json(out / "manifest.json")
    assert manifest["status"] == "complete" and manifest["incomplete"] == []
    acct = read_json(out / "metrics.json")["accounting"]
    rows = read_jsonl(out / "calls.jsonl")
    by_stage = acct["by_stage"]
    assert set(by_stage) == {r["stage"] for r in rows} and set(by_stage) <= set(KIND)
    for stage, fig in by_stage.items():
        mine = [r for r in rows if r["stage"] == stage]
        paid = [r for r in mine if not r["cached"]]
        assert fig["calls"] == len(mine), stage
        assert fig["provider_calls"] == len(paid), stage
        assert fig["cache_hits"] == len(mine) - len(paid), stage
        assert fig["spent_usd"] == sum(r["completion"]["cost_usd"] for r in paid) == len(paid) * 1.0, stage
        assert fig["errors"] == sum(r["completion"]["error"] is not None for r in mine) == 0, stage
    # what the stub was asked during the resume, by task, is what the run says it paid for
    paid_by_kind: Counter = Counter()
    for stage, fig in by_stage.items():
        paid_by_kind[KIND[stage]] += fig["provider_calls"]
    assert paid_by_kind == resumed
    assert acct["provider_calls"] == len(bodies) - len(first) == sum(resumed.values())
    # the five sketches paid before the stop came back from the cache
    sketches = [r for r in rows if r["stage"] == "persona sketches"]
    assert sum(r["cached"] for r in sketches) == len(stopped_calls)
    assert {json.dumps(r["request"], sort_keys=True) for r in stopped_calls} <= {
        json.dumps(r["request"], sort_keys=True) for r in sketches if r["cached"]}
    assert (out / "prompts.jsonl").exists()


def test_single_stage_budget_stop_then_resume(tmp_path, capsys, price_per_call):
    """A stage command shares the build's run handling: `construct screen` with an LLM
    classifier stops after 3 paid calls, writes no screened rows, and resumes."""
    price_per_call(1.0, "clf")
    out = tmp_path / "s"
    with StubServer() as stub:
        stub.handler = Pipeline()
        args = ["construct", "screen", "--classifier", f"llm:openai:clf@{stub.base_url}", "--concurrency", "2",
                "--out", str(out), "--cache", str(tmp_path / "c.sqlite")]
        assert main([*args, "--budget", "3"]) == 3
        err = _stop_lines(capsys)
        assert len(err) == 1 and "spent $3.00 on 3 calls; at least 57 calls left" in err[0], err
        assert len(stub.requests) == 3
        assert read_json(out / "manifest.json")["incomplete"] == ["screen"]
        assert not (out / "screened.jsonl").exists()
        assert main(args) == 0
        bodies = [r.raw for r in stub.requests]
    assert len(bodies) == len(set(bodies)) == 60  # one classifier call per source row, over both runs
    acct = read_json(out / "metrics.json")["accounting"]
    assert acct["by_stage"]["screening classifier"] == {"calls": 60, "provider_calls": 57, "cache_hits": 3,
                                                        "errors": 0, "spent_usd": 57.0}
    assert len(read_jsonl(out / "screened.jsonl")) == 60
