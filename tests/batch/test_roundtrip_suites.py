"""Each suite round-trips through batch mode: export -> fake run_batch -> import -> re-run,
until done, gives the metrics.json of a live run against the same stub, and no
round (the last re-run included) sends a single live request (the stub's log)."""

from __future__ import annotations

import hashlib
import json

from batch.rounds import batch_rounds, live, metrics
from stub_server import StubReply, StubServer


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def risk_answer(req) -> StubReply:
    """A letter chosen by the request's text alone (arrival order differs between a live
    run and a batch), unparseable for one text in seven."""
    body = req.body or {}
    fmt = body.get("response_format") or {}
    props = ((fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}).get("properties") or {}
    text = json.dumps(body.get("messages"), sort_keys=True)
    if _h(text) % 7 == 0:
        return StubReply(content="I am not able to choose.")
    letter = "abcd"[_h(text) % 4]
    return StubReply(content=json.dumps({"answer": letter}) if "answer" in props else letter)


def test_risk_llm_and_vote_round_trip(tmp_path, monkeypatch):
    with StubServer() as stub:
        stub.handler = risk_answer
        args = ["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{stub.base_url}",
                "--method", "llm", "--method", "vote:voters=variants", "--bootstrap", "50"]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              risk_answer, monkeypatch)
        assert len(stub.requests) == n_live  # no round sent a live request
    assert rounds == 1  # llm and the vote's variants are all independent: one round
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    calls = [json.loads(x) for x in (tmp_path / "batch" / "calls.jsonl").read_text().splitlines()]
    assert calls and all(c.get("batch") is True and c["completion"]["batch"] is True for c in calls)
    assert n_live >= len({c["completion"]["text"] + json.dumps(c["request"]) for c in calls})


def test_support_multi_turn_three_judges_round_trip(tmp_path, monkeypatch):
    from carebench.support.tasks import load_tasks
    from support.scripted_stub import Script

    tasks = load_tasks("builtin:sample")[:4]  # 1, 3, 1 and 2 user turns
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        args = ["support", "run", "--responder", f"openai:resp-a@{u}",
                *(x for j in "abc" for x in ("--judge", f"openai:judge-{j}@{u}")),
                "--attempts", "2", "--limit", "4", "--bootstrap", "50"]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              Script(tasks), monkeypatch)
        assert len(stub.requests) == n_live
    assert rounds == 3 + 1  # one round per user turn (3 at most), then the panel's verdicts
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    live_records = (tmp_path / "live" / "records.jsonl").read_text().count("\n")
    assert (tmp_path / "batch" / "records.jsonl").read_text().count("\n") == live_records


def test_support_engagement_judge_round_trip(tmp_path, monkeypatch):
    """--engagement judge: the panel's engagement questions go through batch mode like its verdicts."""
    from carebench.support.tasks import load_tasks
    from support.scripted_stub import Script

    tasks = load_tasks("builtin:sample")[:2]  # 1 and 3 user turns
    with StubServer() as stub:
        stub.handler = Script(tasks)
        u = stub.base_url
        args = ["support", "run", "--responder", f"openai:resp-a@{u}",
                *(x for j in "ab" for x in ("--judge", f"openai:judge-{j}@{u}")),
                "--attempts", "1", "--limit", "2", "--bootstrap", "50", "--engagement", "judge"]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        asked = sum("THE ASSISTANT'S REPLY TO SORT" in r.text for r in stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              Script(tasks), monkeypatch)
        assert len(stub.requests) == n_live
    assert asked == 2 * 2  # one question per reply and judge
    assert rounds == 3 + 1 + 1  # the user turns, the panel's verdicts, then the engagement questions
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    assert metrics(tmp_path / "batch")["engagement"]["responders"][f"openai:resp-a@{u}"]["rates"]["engaged"]["rate"] == 1.0


def test_plural_run_engagement_judge_round_trip(tmp_path, monkeypatch):
    """plural run --engagement judge: the engagement questions go out in the jury's round; a
    re-score under --refusal-policy zero asks nothing."""
    from engagement_stub import ENGAGEMENT_QUESTION, handler, write_release

    release = write_release(tmp_path / "release")
    with StubServer() as stub:
        stub.handler = handler
        u = stub.base_url
        args = ["plural", "run", "--release", str(release), "--system", f"openai:sys-r@{u}",
                "--system", f"openai:sys-m@{u}", "--judge", f"openai:judge-a@{u}", "--judge", f"openai:judge-b@{u}",
                "--sample-size", "4", "--bootstrap", "50", "--engagement", "judge"]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        asked = sum(ENGAGEMENT_QUESTION in r.text for r in stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir", handler,
                              monkeypatch)
        from carebench.cli import main

        assert main(["plural", "rescore", str(tmp_path / "batch"), "--refusal-policy", "zero",
                     "--out", str(tmp_path / "zero")]) == 0
        assert len(stub.requests) == n_live
    assert asked == 3 * 2  # three distinct replies the pre-filter leaves open, two judges
    assert rounds == 2  # the responses, then the jury's verdicts with the engagement questions
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    assert metrics(tmp_path / "zero")["engagement"]["policy"] == "zero"


def test_plural_calibrate_e2_round_trip(tmp_path, monkeypatch):
    from labelling_stub import Labeller

    from carebench.datasets.prompts import load_annotations, load_prompts
    from carebench.plural.data import builtin_path

    prompts = load_prompts(builtin_path("prompts.jsonl"))
    annotations = load_annotations(builtin_path("annotations.jsonl"))
    with StubServer() as stub:
        stub.handler = Labeller(prompts, annotations)
        args = ["plural", "calibrate", "--model", f"openai:labeller@{stub.base_url}", "--method", "E0",
                "--method", "E2", "--bootstrap", "50"]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              Labeller(prompts, annotations), monkeypatch)
        assert len(stub.requests) == n_live
    assert rounds == 2  # the zero-shot labels E2's demonstrations are drawn from, then E2's own
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")


def test_construct_build_round_trip(tmp_path, monkeypatch):
    import yaml
    from construct_stub import Pipeline

    with StubServer() as stub:
        stub.handler = Pipeline()
        def m(name: str) -> str:
            return f"openai:{name}@{stub.base_url}"

        (tmp_path / "literals.txt").write_text("forum_sg\n", "utf-8")
        cfg = {"router": m("router"), "judge": m("judge"), "rewriters": [m("good"), m("leaky"), m("plain")],
               "literals": str(tmp_path / "literals.txt"), "embedder": "hashing", "topics": 3}
        (tmp_path / "build.yaml").write_text(yaml.safe_dump(cfg), "utf-8")
        args = ["construct", "build", "--config", str(tmp_path / "build.yaml")]
        live(args, tmp_path / "live", tmp_path / "live.sqlite")
        n_live = len(stub.requests)
        rounds = batch_rounds(args, tmp_path / "batch", tmp_path / "batch.sqlite", tmp_path / "bdir",
                              Pipeline(), monkeypatch)
        assert len(stub.requests) == n_live
    assert rounds == 4  # persona sketches, persona picks, rewrites, then the construction judge
    assert metrics(tmp_path / "batch") == metrics(tmp_path / "live")
    assert (tmp_path / "batch" / "prompts.jsonl").read_text() == (tmp_path / "live" / "prompts.jsonl").read_text()
