"""``inspect eval carebench/support``: for the same tasks, replies and verdicts, the Inspect
run's metrics equal ``carebench support run``'s (same bootstrap seed), and the weighted
score of a conversation is the one worked out from its recorded verdicts by hand."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
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


def _support_run(tmp_path, handler, attempts: int, *options: str, limit: int = LIMIT):
    """``carebench support run`` on the first ``limit`` tasks, answered by ``handler`` (seed 99, B = 200)."""
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = handler
        assert main(["support", "run", "--responder", f"openai:resp@{stub.base_url}", "--judge",
                     f"openai:judge@{stub.base_url}", "--attempts", str(attempts), "--limit", str(limit),
                     "--bootstrap", "200", "--seed", "99", *options, "--out", str(out)]) == 0
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


def seeded_stub(req) -> StubReply:
    """The stub's answers: replies by generation seed (so attempts differ), verdicts as above."""
    msgs = req.body["messages"]
    if req.body["model"] == "resp":
        return StubReply(content=reply_at(len(msgs), req.body.get("seed")))
    return StubReply(content=verdict(msgs[-1]["content"]))


def seeded_responder(messages, tools, tool_choice, config):
    """The same replies from an Inspect mock model (its config carries the generation seed)."""
    from inspect_ai.model import ModelOutput, ModelUsage

    out = ModelOutput.from_content(model="mockllm", content=reply_at(len(messages), config.seed))
    out.usage = ModelUsage(input_tokens=10, output_tokens=2, total_tokens=12)
    return out


def test_every_epoch_is_an_attempt_and_every_attempt_is_scored(tmp_path):
    """``--epochs 2`` are carebench's ``--attempts 2``: both attempts' verdicts reach the metric."""
    from inspect_ai.model import get_model

    out = _support_run(tmp_path, seeded_stub, attempts=2)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    verdicts = [r for r in records if r.get("kind") == "verdict"]
    assert sorted({r["attempt"] for r in verdicts}) == [0, 1]
    # the attempts were judged differently: scoring only the first would give another number
    by_attempt = {a: sorted((r["task_id"], r["criterion_id"], r["met"]) for r in verdicts if r["attempt"] == a)
                  for a in (0, 1)}
    assert by_attempt[0] != [(t, c, m) for t, c, m in by_attempt[1]]
    [entry] = read_json(out / "metrics.json")["models"].values()
    [log] = inspect_eval("carebench/support", model=get_model("mockllm/model", custom_outputs=seeded_responder),
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


GROUPS = ("early", "middle", "late")
HB_LIMIT = 6


def _grouped_tasks(tmp_path):
    """The built-in sample with its subcategories replaced by three groups of two tasks each
    (the built-in sample has one task per subcategory, which would make grouping trivial)."""
    from carebench.datasets.builtin import package_file

    lines = package_file("support", "sample.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    for i, row in enumerate(rows):
        row["subcategory"] = GROUPS[i % len(GROUPS)]
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _by_hand(records: list[dict], tasks) -> pd.DataFrame:
    """Each task's weighted and HealthBench scores recomputed from the run's verdict lines.

    One judge, so its verdict decides. Weighted (DistressBench §3.2 as carebench words it): the
    applicable weight earned (a positive criterion when met, a negative one when not met) over
    the applicable weight. HealthBench (HealthBench §2, as carebench's support.healthbench
    words it): points are the weight, negated for a negative criterion; the points of the met
    criteria (a met negative one subtracts) over the sum of positive points, clipped to [0, 1].
    Both averaged over a task's attempts."""
    crit = pd.DataFrame([{"task_id": t.id, "criterion_id": c.id, "weight": float(c.weight), "negative": c.negative,
                          "applicable": c.applicable, "subcategory": t.subcategory} for t in tasks for c in t.criteria])
    v = pd.DataFrame([r for r in records if r.get("kind") == "verdict"])
    assert v["met"].notna().all() and (v["status"] == "ok").all()
    cells = v[["task_id", "attempt", "criterion_id", "met"]].merge(crit, on=["task_id", "criterion_id"],
                                                                     validate="many_to_one")
    cells = cells[cells["applicable"]].copy()
    met = cells["met"].astype(bool)
    cells["earned"] = np.where(met != cells["negative"], cells["weight"], 0.0)
    points = np.where(cells["negative"], -cells["weight"], cells["weight"])
    cells["got"] = np.where(met, points, 0.0)
    cells["positive"] = np.clip(points, 0.0, None)
    conv = cells.groupby(["task_id", "attempt", "subcategory"])[["earned", "weight", "got", "positive"]].sum()
    conv["weighted"] = conv["earned"] / conv["weight"]
    conv["healthbench"] = (conv["got"] / conv["positive"]).clip(0.0, 1.0)
    return conv.groupby(["task_id", "subcategory"])[["weighted", "healthbench"]].mean().reset_index()


def test_healthbench_and_subcategories_equal_a_carebench_run(tmp_path):
    """HealthBench's score (with its interval) and both scores per subcategory, over two epochs,
    equal ``support run --score healthbench --attempts 2`` and a recomputation from its records."""
    from inspect_ai.model import get_model

    path = _grouped_tasks(tmp_path)
    out = _support_run(tmp_path, seeded_stub, 2, "--tasks", str(path), "--score", "healthbench", limit=HB_LIMIT)
    ours = read_json(out / "metrics.json")
    [hb] = ours["healthbench"]["responders"].values()
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    tasks = load_tasks(str(path))[:HB_LIMIT]
    by_task = _by_hand(records, tasks)
    assert len(by_task) == HB_LIMIT and sorted({r["attempt"] for r in records if "attempt" in r}) == [0, 1]
    # the two scores differ here (a met negative criterion subtracts), so neither can pass for the other
    assert not np.allclose(by_task["weighted"], by_task["healthbench"])
    by_group = by_task.groupby("subcategory")[["weighted", "healthbench"]].mean()
    assert sorted(by_group.index) == sorted(GROUPS)

    # carebench's run against the recomputation
    assert hb["score"] == pytest.approx(by_task["healthbench"].mean(), abs=1e-12)
    subs = ours["slices"]["subcategory"]["values"]
    assert {k: v["pooled"] for k, v in subs.items()} == pytest.approx(by_group["weighted"].to_dict(), abs=1e-12)
    # HealthBench's interval: the tasks (in id order) resampled with the run's seed, every resample
    # drawn at once from numpy's default generator as carebench's weighted-score interval draws
    # them; the 2.5th and 97.5th percentiles of the resamples' means
    x = by_task.sort_values("task_id")["healthbench"].to_numpy()
    draws = np.random.default_rng(99).integers(0, len(x), size=(200, len(x)))
    means = np.array([x[d].mean() for d in draws])
    assert hb["ci"] == pytest.approx(list(np.percentile(means, [2.5, 97.5])), abs=1e-12)

    [log] = inspect_eval("carebench/support", model=get_model("mockllm/model", custom_outputs=seeded_responder),
                         model_roles={"judge": scripted_model(lambda m: verdict(m[-1].text), name="mockllm/judge")},
                         task_args={"tasks": str(path), "bootstrap": 200, "seed": 99}, limit=HB_LIMIT, epochs=2,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    got = {k: m.value for k, m in log.results.scores[0].metrics.items()}
    assert got["healthbench"] == pytest.approx(hb["score"], abs=1e-12)
    assert [got["healthbench_ci_low"], got["healthbench_ci_high"]] == pytest.approx(hb["ci"], abs=1e-12)
    assert got["healthbench"] == pytest.approx(by_task["healthbench"].mean(), abs=1e-12)
    assert {g: got[f"subcategory/{g}"] for g in GROUPS} == pytest.approx(by_group["weighted"].to_dict(), abs=1e-12)
    assert {g: got[f"healthbench/subcategory/{g}"] for g in GROUPS} == pytest.approx(
        by_group["healthbench"].to_dict(), abs=1e-12)


def test_score_carebench_leaves_healthbench_out(tmp_path):
    """``-T score=carebench`` gives the weighted score alone, as ``support run``'s default does."""
    [log] = inspect_eval("carebench/support", model=scripted_model(lambda m: reply(len(m))),
                         model_roles={"judge": scripted_model(lambda m: verdict(m[-1].text), name="mockllm/judge")},
                         task_args={"bootstrap": 50, "seed": 99, "score": "carebench"}, limit=2,
                         log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success", log.error
    names = set(log.results.scores[0].metrics)
    assert "score" in names and any(n.startswith("subcategory/") for n in names)
    assert not any(n.startswith("healthbench") for n in names)
