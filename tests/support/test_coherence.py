"""The multi-turn coherence gate (DistressBench A.5) against the loopback stub."""

from __future__ import annotations

import json

import pytest
from rerender_bytes import assert_rerenders_byte_for_byte

from carebench.cli import main
from carebench.support.coherence import sample_multi_turn, summarize
from carebench.support.tasks import load_tasks
from stub_server import StubReply, StubServer


def test_gate_rates_per_task_and_model(tmp_path, capsys):
    tasks = load_tasks("builtin:sample")
    multi = [t for t in tasks if t.multi_turn]
    sampled = sample_multi_turn(tasks, 2, 12345)
    assert len(sampled) == 2 and all(t.multi_turn for t in sampled)
    bad_task = sampled[0]
    seen = []

    def handler(req):
        msgs = req.body["messages"]
        if req.body["model"].startswith("resp-"):
            users = [m for m in msgs if m["role"] == "user"]
            return StubReply(content=f"[{req.body['model']}] reply {len(users)}")
        prompt = msgs[-1]["content"]
        seen.append(prompt)
        # the judge: resp-b's replies break the script of the first sampled task
        breaks = "[resp-b]" in prompt and bad_task.turns[0] in prompt
        return StubReply(content=json.dumps({"met": not breaks, "rationale": "scripted"}))

    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        out = tmp_path / "gate"
        assert main(["support", "coherence", "--tasks", "builtin:sample", "--model", f"openai:resp-a@{u}",
                     "--model", f"openai:resp-b@{u}", "--judge", f"openai:judge@{u}", "--n", "2",
                     "--out", str(out), "--no-cache"]) == 0
    m = json.loads((out / "metrics.json").read_text())
    n_trans = {t.id: len(t.turns) - 1 for t in sampled}
    assert m["transitions"] == 2 * sum(n_trans.values()) == len(seen)
    # the first task: resp-a's transitions all follow, resp-b's none -> 50%; the second: 100%
    per = m["per_task"]
    assert per[bad_task.id]["rate"] == pytest.approx(0.5) and not per[bad_task.id]["passes"]
    assert per[sampled[1].id]["rate"] == 1.0 and per[sampled[1].id]["passes"]
    assert m["failing_tasks"] == [bad_task.id]
    b = f"openai:resp-b@{u}"
    assert m["per_model"][b]["acceptable"] == n_trans[sampled[1].id]
    assert m["per_task_model"][bad_task.id][b] == 0.0
    # every transition prompt shows the conversation up to the reply and the next scripted turn
    assert all("NEXT PREPARED MESSAGE" in p for p in seen)
    assert "below the gate" in capsys.readouterr().out
    assert main(["report", str(out)]) == 0  # re-rendered from what was recorded
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["suite"], manifest["kind"]) == ("support", "coherence")
    assert_rerenders_byte_for_byte(out)  # metrics recomputed from records.jsonl, same bytes
    assert len(multi) >= 2
    # the headline box: the gate's decision and the acceptable share, recounted from records.jsonl
    from headline_box import headline_box
    from test_headlines import page, raw_codes

    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    judged = [r for r in rows if r.get("kind") == "transition" and r["status"] == "ok"]
    box = headline_box(out)
    assert box.verdict == "Gate failed: 1 of 2 tasks below 90% acceptable transitions"
    assert box.measure.startswith("acceptable transitions") and box.n() == len(judged) == len(seen)
    shown = float(box.measure.split("higher is better) ")[1].split(" ")[0])
    assert shown == pytest.approx(sum(r["follows"] for r in judged) / len(judged), abs=5e-4)
    assert f"tasks below the gate: {bad_task.id}" in box.caveats
    assert any(c.startswith("small n: 2 tasks checked (A.5 checked 18)") for c in box.caveats)
    per_b = [r for r in judged if r["model"] == b]
    assert box.rows[b].startswith(f"{sum(r['follows'] for r in per_b) / len(per_b):.3f} (")
    assert not raw_codes(page(out)), raw_codes(page(out))  # names, not stored codes (docs/architecture.md)


def test_dry_run_plans_the_gate_and_is_exact_once_cached(tmp_path, capsys):
    """Regeneration is followed through the cache; replies not yet made are assumed to fill
    their output cap, so the transition verdicts are estimates until they are cached."""
    sampled = sample_multi_turn(load_tasks("builtin:sample"), 2, 12345)
    n_gen = 2 * sum(len(t.turns) for t in sampled)  # two models, every user turn answered
    n_trans = 2 * sum(len(t.turns) - 1 for t in sampled)

    def handler(req):
        if req.body["model"].startswith("resp-"):
            return StubReply(content=f"[{req.body['model']}] a reply")
        return StubReply(content=json.dumps({"met": True, "rationale": "follows"}))

    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        args = ["support", "coherence", "--tasks", "builtin:sample", "--model", f"openai:resp-a@{u}",
                "--model", f"openai:resp-b@{u}", "--judge", f"openai:judge@{u}", "--n", "2",
                "--cache", str(tmp_path / "c.sqlite"), "--concurrency", "2"]
        capsys.readouterr()
        assert main([*args, "--dry-run", "--json"]) == 0
        plan = {s["name"]: s for s in json.loads(capsys.readouterr().out)["stages"]}
        assert stub.count() == 0 and plan["generation"]["calls"] == n_gen
        assert plan["coherence verdicts"]["calls"] == n_trans and not plan["coherence verdicts"]["exact"]
        assert main([*args, "--out", str(tmp_path / "gate")]) == 0
        assert stub.count() == n_gen + n_trans
        capsys.readouterr()
        assert main([*args, "--dry-run", "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
    assert again["to_make"] == 0 and again["cached"] == n_gen + n_trans
    assert all(s["exact"] for s in again["stages"])


def test_failed_judge_answers_are_counted_not_rated():
    rows = [{"task": "t", "model": "m", "follows": True, "status": "ok"},
            {"task": "t", "model": "m", "follows": None, "status": "parse_error"},
            {"task": "t", "model": "m", "follows": False, "status": "ok"}]
    s = summarize(rows, 0.9)
    assert (s["transitions"], s["judged"], s["not_judged"]) == (3, 2, 1)
    assert s["per_task"]["t"] == {"judged": 2, "acceptable": 1, "rate": 0.5, "passes": False}


def test_no_transition_judged_is_said_in_words(tmp_path, capsys):
    """Every judge answer unparseable: the run is written and the console says no transition
    could be judged (it once formatted a missing rate and crashed)."""
    def handler(req):
        return StubReply(content="garbage, not a verdict")

    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        out = tmp_path / "gate"
        assert main(["support", "coherence", "--tasks", "builtin:sample", "--model", f"openai:resp@{u}",
                     "--judge", f"openai:judge@{u}", "--n", "1", "--out", str(out), "--no-cache"]) == 0
    assert json.loads((out / "metrics.json").read_text())["overall_rate"] is None
    assert "no transition could be judged" in capsys.readouterr().out
