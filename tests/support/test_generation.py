"""Regeneration: turn order, attempts as separate samples, caps, system prompt, outcomes, cache."""

from __future__ import annotations

import pytest

from carebench.engine.options import run_options
from carebench.engine.run import Run
from carebench.models import get_model
from carebench.support.generation import GenerationConfig, generate, reference_responses
from carebench.support.tasks import load_tasks
from stub_server import StubReply, StubServer


@pytest.fixture
def tasks():
    all_tasks = load_tasks("builtin:sample")
    three = next(t for t in all_tasks if len(t.turns) == 3)
    single = next(t for t in all_tasks if len(t.turns) == 1)
    return [single, three]


def _reply(req):
    users = [m for m in req.body["messages"] if m["role"] == "user"]
    return StubReply(content=f"reply to turn {len(users)} seed {req.body.get('seed')}")


def test_turns_run_in_order_with_the_responders_own_history(tasks, tmp_path):
    with StubServer() as stub:
        stub.handler = _reply
        spec_a, spec_b = f"openai:a@{stub.base_url}", f"openai:b@{stub.base_url}"
        cfg = GenerationConfig(attempts=2, caps={spec_b: 77}, max_tokens=300, system_prompt="Be kind.")
        runner = Run(run_options(cache=tmp_path / "c.sqlite", progress=False))
        res = generate(tasks, [get_model(spec_a), get_model(spec_b)], runner, cfg)
        reqs = list(stub.requests)
        # 2 responders x 2 attempts x (1 + 3) user turns
        assert len(reqs) == 16
        # every turn-3 request carries that conversation's own two earlier replies
        for r in reqs:
            msgs = r.body["messages"]
            assert msgs[0] == {"role": "system", "content": "Be kind."}
            users = [m for m in msgs if m["role"] == "user"]
            assistants = [m["content"] for m in msgs if m["role"] == "assistant"]
            seed = r.body["seed"]
            assert assistants == [f"reply to turn {k} seed {seed}" for k in range(1, len(users))]
            assert r.body["max_tokens"] == (77 if r.body["model"] == "b" else 300)
            assert r.body["temperature"] == pytest.approx(0.7)
        # turn t+1 is only requested after every turn-t answer (one batch per turn index)
        turn_of = [sum(m["role"] == "user" for m in r.body["messages"]) for r in reqs]
        assert turn_of == sorted(turn_of) and turn_of.count(1) == 8 and turn_of.count(3) == 4
        # attempts are distinct samples: distinct seeds for the same prompt
        first = [r for r in reqs if r.body["model"] == "a" and len(r.body["messages"]) == 2
                 and r.body["messages"][1]["content"] == tasks[0].turns[0]]
        assert sorted(r.body["seed"] for r in first) == [12345, 12346]
        # re-running answers from the cache: no new request
        hits = runner.ledger.cache_hits
        generate(tasks, [get_model(spec_a), get_model(spec_b)], runner, cfg)
        assert len(stub.requests) == 16 and runner.ledger.cache_hits - hits == 16
    assert len(res.responses) == 8
    multi = next(r for r in res.responses if r.task_id == tasks[1].id and r.responder == spec_a and r.attempt == 1)
    assert [t["role"] for t in multi.turns] == ["user", "assistant"] * 3
    assert multi.final_reply == "reply to turn 3 seed 12346" and multi.status == "ok"
    assert multi.usage["completion_tokens"] > 0


def test_empty_filtered_and_truncated_replies_are_recorded(tasks, tmp_path):
    single, three = tasks

    def handler(req):
        users = [m for m in req.body["messages"] if m["role"] == "user"]
        if users[0]["content"] == single.turns[0]:
            return StubReply(content="", finish_reason="content_filter")
        if len(users) == 1:
            return StubReply(content="")  # blank first turn, carried into the history
        if len(users) == 2:
            return StubReply(content="cut off", finish_reason="length")
        return StubReply(content="fine")

    with StubServer() as stub:
        stub.handler = handler
        spec = f"openai:m@{stub.base_url}"
        res = generate(tasks, [get_model(spec)], Run(run_options(no_cache=True, progress=False)),
                       GenerationConfig(attempts=1))
        last = stub.requests[-1].body["messages"]
    assert [m["content"] for m in last if m["role"] == "assistant"] == ["", "cut off"]
    by_task = {r.task_id: r for r in res.responses}
    assert by_task[single.id].status == "content_filter" and by_task[single.id].final_reply == ""
    assert [t.get("status") for t in by_task[three.id].turns if t["role"] == "assistant"] == ["empty", "truncated", "ok"]
    assert by_task[three.id].status == "ok"


def test_references_are_final_turn_replies(tasks):
    refs = reference_responses(tasks)
    assert [r.responder for r in refs] == ["reference", "reference"]
    multi = refs[1]
    assert [t["role"] for t in multi.turns] == ["user", "user", "user", "assistant"]
    assert multi.final_reply == tasks[1].reference and multi.status == "ok"


def test_reference_is_judged_after_the_scripted_conversation(tmp_path):
    """A task file's scripted assistant replies are never sent to a responder, but the
    reference (written for that scripted conversation) is judged with them in place."""
    from test_tasks import _row

    from carebench.support.judging import criterion_question
    from carebench.support.tasks import Task

    row = _row(turns=[{"role": "user", "content": "first"}, {"role": "assistant", "content": "SCRIPTED"},
                      {"role": "user", "content": "second"}], reference="REF")
    row["metadata"]["turn_structure"] = "multi"
    task = Task.model_validate(row)
    (ref,) = reference_responses([task])
    assert [(t["role"], t["content"]) for t in ref.turns] == [
        ("user", "first"), ("assistant", "SCRIPTED"), ("user", "second"), ("assistant", "REF")]
    prompt = criterion_question(ref, task.criteria[0], "final").messages[-1].content
    assert prompt.index("first") < prompt.index("SCRIPTED") < prompt.index("second") < prompt.index("REF")
    with StubServer() as stub:
        stub.handler = _reply
        m = get_model(f"openai:resp@{stub.base_url}")
        runner = Run(run_options(cache=tmp_path / "c.sqlite", progress=False))
        generate([task], [m], runner, GenerationConfig(attempts=1))
        assert all("SCRIPTED" not in str(r.body["messages"]) for r in stub.requests)


def test_truncated_replies_are_recollected_with_a_larger_cap_and_both_kept(tmp_path):
    """Appendix G: truncation is counted over every turn; --recollect-truncated asks a
    truncated reply again with a larger cap and records both; identical replies across
    attempts are counted (hand-worked: the stub repeats itself on one task)."""
    from carebench.support.analyses import analyze

    all_tasks = load_tasks("builtin:sample")
    multi = next(t for t in all_tasks if len(t.turns) == 2)
    single = next(t for t in all_tasks if len(t.turns) == 1)

    def reply(req):
        users = [m for m in req.body["messages"] if m["role"] == "user"]
        if users[0]["content"] == single.turns[0]:
            return StubReply(content="the same words every time")  # identical across attempts
        if len(users) == 1 and req.body["max_tokens"] < 1000:  # turn 1 of the multi-turn task hits the cap
            return StubReply(content="cut off mid", finish_reason="length")
        return StubReply(content=f"full reply to turn {len(users)} seed {req.body.get('seed')}")

    def run(recollect: bool):
        with StubServer() as stub:
            stub.handler = reply
            m = get_model(f"openai:resp@{stub.base_url}")
            runner = Run(run_options(cache=tmp_path / f"{recollect}.sqlite", progress=False))
            gen = generate([single, multi], [m], runner,
                           GenerationConfig(attempts=3, max_tokens=600, recollect_truncated=recollect))
            caps = [r.body["max_tokens"] for r in stub.requests]
        return gen.responses, caps

    plain, caps = run(False)
    assert sorted(set(caps)) == [600]
    verdicts = []
    trunc = analyze([single, multi], plain, verdicts, B=10)["truncation"]["per_responder"]
    (entry,) = trunc.values()
    # 3 single-turn + 3 x 2 multi-turn assistant turns; the three first turns of the multi-turn task truncated
    assert (entry["turns"], entry["truncated_turns"], entry["truncated_final"]) == (9, 3, 0)
    # single task: all 3 attempts identical (3 pairs); multi task: seeds differ, 0 of 3 pairs
    assert (entry["identical_pairs"], entry["attempt_pairs"], entry["tasks_all_attempts_identical"]) == (3, 6, 1)

    again, caps = run(True)
    assert caps.count(1200) == 3  # one re-collection per truncated turn, at twice the cap
    conv = next(r for r in again if r.task_id == multi.id and r.attempt == 0)
    first = conv.turns[1]
    assert first["content"].startswith("full reply to turn 1") and first["max_tokens"] == 1200
    assert first["recollected_from"] == {"content": "cut off mid", "status": "truncated", "max_tokens": 600}
    (entry,) = analyze([single, multi], again, [], B=10)["truncation"]["per_responder"].values()
    assert (entry["truncated_turns"], entry["recollected_turns"]) == (0, 3)
