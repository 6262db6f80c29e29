"""``inspect eval carebench/support``: for the same tasks, replies and verdicts, the Inspect
run's metrics equal ``carebench support run``'s (same bootstrap seed), and the weighted
score of a conversation is the one worked out from its recorded verdicts by hand."""

from __future__ import annotations

import json

import pytest
from inspect_harness import need_inspect, scripted_model

need_inspect()

from inspect_ai import eval as inspect_eval

from carebench.cli import main
from carebench.engine.rundir import read_json
from carebench.support.tasks import load_tasks
from stub_server import StubReply, StubServer

LIMIT = 4


def reply(n_messages: int) -> str:
    return f"I hear you. Reply {n_messages}."


def verdict(prompt: str) -> str:
    return json.dumps({"met": len(prompt) % 3 != 0, "rationale": f"length {len(prompt)}"})


def _stub(req) -> StubReply:
    msgs = req.body["messages"]
    if req.body["model"] == "resp":
        return StubReply(content=reply(len(msgs)))
    return StubReply(content=verdict(msgs[-1]["content"]))


def _support_run(tmp_path, handler, attempts: int):
    """``carebench support run`` on the first LIMIT tasks, answered by ``handler`` (seed 99, B = 200)."""
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = handler
        assert main(["support", "run", "--responder", f"openai:resp@{stub.base_url}", "--judge",
                     f"openai:judge@{stub.base_url}", "--attempts", str(attempts), "--limit", str(LIMIT),
                     "--bootstrap", "200", "--seed", "99", "--out", str(out)]) == 0
    return out


def test_support_metrics_equal_a_carebench_run(tmp_path):
    out = _support_run(tmp_path, _stub, attempts=1)
    ours = read_json(out / "metrics.json")
    [entry] = ours["models"].values()
    [log] = inspect_eval("carebench/support", model=scripted_model(lambda m: reply(len(m))),
                         model_roles={"judge": scripted_model(lambda m: verdict(m[-1].text), name="mockllm/judge")},
                         task_args={"bootstrap": 200, "seed": 99}, limit=LIMIT, log_dir=str(tmp_path / "logs"),
                         display="none")
    assert log.status == "success", log.error
    got = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    assert got["score"] == pytest.approx(entry["score"], abs=1e-12)
    assert [got["score_ci_low"], got["score_ci_high"]] == pytest.approx(entry["ci"], abs=1e-12)
    assert got["full_satisfaction"] == pytest.approx(entry["full_satisfaction"], abs=1e-12)
    subs = ours["slices"]["subcategory"]["values"]
    assert {k.split("/", 1)[1]: v for k, v in got.items() if k.startswith("subcategory/")} == pytest.approx(
        {k: v["pooled"] for k, v in subs.items()}, abs=1e-12)
    # one conversation by hand (DistressBench §3.2 as carebench words it): earned weight over the applicable
    # weight; one judge, so its verdict decides; a positive criterion earns when met, a negative one when not
    tasks = {t.id: t for t in load_tasks("builtin:sample")}
    sample = log.samples[0]
    t = tasks[sample.id]
    met = {v["criterion_id"]: v["met"] for v in sample.scores["carebench/criterion_panel"].metadata["verdicts"]}
    total = sum(c.weight for c in t.criteria if c.applicable)
    earned = sum(c.weight for c in t.criteria if c.applicable and met[c.id] is (not c.negative))
    assert sample.scores["carebench/criterion_panel"].value == pytest.approx(earned / total)


def reply_at(n_messages: int, seed: int | None) -> str:
    """A reply that differs between attempts (their generation seeds differ)."""
    return f"I hear you. Reply {n_messages}, take {seed}" + "." * ((seed or 0) % 3)


def test_every_epoch_is_an_attempt_and_every_attempt_is_scored(tmp_path):
    """``--epochs 2`` are carebench's ``--attempts 2``: both attempts' verdicts reach the metric."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    def stub(req) -> StubReply:
        msgs = req.body["messages"]
        if req.body["model"] == "resp":
            return StubReply(content=reply_at(len(msgs), req.body.get("seed")))
        return StubReply(content=verdict(msgs[-1]["content"]))

    def responder(messages, tools, tool_choice, config) -> ModelOutput:
        out = ModelOutput.from_content(model="mockllm", content=reply_at(len(messages), config.seed))
        out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
        return out

    out = _support_run(tmp_path, stub, attempts=2)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    verdicts = [r for r in records if r.get("kind") == "verdict"]
    assert sorted({r["attempt"] for r in verdicts}) == [0, 1]
    # the attempts were judged differently: scoring only the first would give another number
    by_attempt = {a: sorted((r["task_id"], r["criterion_id"], r["met"]) for r in verdicts if r["attempt"] == a)
                  for a in (0, 1)}
    assert by_attempt[0] != [(t, c, m) for t, c, m in by_attempt[1]]
    [entry] = read_json(out / "metrics.json")["models"].values()
    [log] = inspect_eval("carebench/support", model=get_model("mockllm/model", custom_outputs=responder),
                         model_roles={"judge": scripted_model(lambda m: verdict(m[-1].text), name="mockllm/judge")},
                         task_args={"bootstrap": 200, "seed": 99}, limit=LIMIT, epochs=2,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    got = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    assert got["score"] == pytest.approx(entry["score"], abs=1e-12)
    assert [got["score_ci_low"], got["score_ci_high"]] == pytest.approx(entry["ci"], abs=1e-12)
    assert got["full_satisfaction"] == pytest.approx(entry["full_satisfaction"], abs=1e-12)
    # and the score by hand: the mean over tasks of each task's mean over its two attempts
    # (DistressBench §3.2's weighted score of each conversation from its recorded verdicts)
    tasks = {t.id: t for t in load_tasks("builtin:sample")}
    per: dict[str, list[float]] = {}
    for s in log.samples:
        sc = s.scores["carebench/criterion_panel"]
        met = {v["criterion_id"]: v["met"] for v in sc.metadata["verdicts"]}
        t = tasks[s.id]
        total = sum(c.weight for c in t.criteria if c.applicable)
        per.setdefault(s.id, []).append(sum(c.weight for c in t.criteria if c.applicable
                                            and met[c.id] is (not c.negative)) / total)
    assert all(len(v) == 2 for v in per.values()) and len(per) == LIMIT
    assert got["score"] == pytest.approx(sum(sum(v) / 2 for v in per.values()) / LIMIT, abs=1e-12)
