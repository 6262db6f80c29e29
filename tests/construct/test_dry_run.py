"""`construct build --dry-run` prints the plan shape every suite prints (whole-run cost,
where reply lengths come from, per stage and per model), calls nothing, and bounds
what the build then does: against the stub at $1 a call, the screening-determined
sketches are exact, every later stage's planned calls are at least the distinct
requests the build sent (counted from its calls.jsonl), and after the build a second
dry run finds every call in the cache."""

from __future__ import annotations

import json
from collections import defaultdict

from construct_stub import Pipeline
from test_budget import MODELS, _config

from carebench.cli import main
from carebench.construct.io import builtin_path
from carebench.engine.rundir import read_jsonl
from stub_server import StubServer


def _plan(capsys, args) -> dict:
    capsys.readouterr()
    assert main([*args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_build_dry_run_bounds_the_build_and_follows_the_cache(tmp_path, capsys, price_per_call):
    price_per_call(1.0, *MODELS, "stub")
    out = tmp_path / "run"
    with StubServer() as stub:
        stub.handler = Pipeline()
        url = stub.base_url
        cache = ["--cache", str(tmp_path / "c.sqlite")]
        args = ["construct", "build", "--config", str(_config(tmp_path, url)), "--limit", "20", *cache]
        cold = _plan(capsys, [*args, "--out", str(out)])
        risk = _plan(capsys, ["risk", "run", "--data", "builtin:sample", "--model", f"openai:stub@{url}",
                              "--method", "llm", *cache])
        assert stub.requests == [] and not out.exists()  # nothing called, nothing written
        assert main([*args, "--out", str(out)]) == 0
        warm = _plan(capsys, [*args, "--out", str(tmp_path / "again")])
        assert len(stub.requests) == len({r.raw for r in stub.requests})  # the dry run sent nothing

    # the same shape as another suite's plan
    assert set(cold) == set(risk) and cold["suite"] == "construct"
    assert {k for s in cold["stages"] for k in s} == {k for s in risk["stages"] for k in s}
    assert set(cold["by_model"][f"openai:router@{url}"]) == set(risk["by_model"][f"openai:stub@{url}"])

    # distinct requests per stage, from the build's own call log
    sent: dict[str, set[str]] = defaultdict(set)
    for row in read_jsonl(out / "calls.jsonl"):
        sent[row["stage"]].add(json.dumps([row["model"], row["request"]], sort_keys=True))
    stages = {s["name"]: s for s in cold["stages"]}
    assert list(stages) == ["persona sketches", "persona picks", "selection rewrites", "selection judge",
                            "rewrites", "construction judge"]
    # screening makes no call here, so which rows get a sketch is known before any call
    assert stages["persona sketches"]["exact"] and not stages["persona sketches"]["upper_bound"]
    assert stages["persona sketches"]["calls"] == len(sent["persona sketches"])
    for name, s in stages.items():
        assert s["calls"] >= len(sent[name]), name
        if name != "persona sketches":  # prompts built from answers the plan had to assume
            assert s["upper_bound"] and not s["exact"], name
    assert cold["upper_bound"] and cold["cached"] == 0 and cold["to_make"] == cold["calls"]
    # $1 a call and nothing cached: the estimate is one dollar per call to make
    assert cold["estimated_cost_usd"] == cold["to_make"] * 1.0
    assert cold["by_model"][f"openai:router@{url}"]["reply_lengths"] == "output caps"

    # after the build the chain is followed through the cache: exact, and nothing left to pay
    assert not warm["upper_bound"] and warm["to_make"] == 0 and warm["estimated_cost_usd"] == 0
    assert {s["name"]: s["calls"] for s in warm["stages"]} == {k: len(v) for k, v in sent.items()}
    assert all(s["exact"] and s["cached"] == s["calls"] for s in warm["stages"])


def test_stage_dry_run_has_the_same_shape(tmp_path, capsys):
    """A stage command plans through the same code: `construct route --dry-run`."""
    assert main(["construct", "screen", "--out", str(tmp_path / "s")]) == 0
    rows = read_jsonl(tmp_path / "s" / "screened.jsonl")
    plan = _plan(capsys, ["construct", "route", "--rows", str(tmp_path / "s" / "screened.jsonl"),
                          "--model", "openai:router@http://127.0.0.1:9/v1", "--embedder", "hashing",
                          "--out", str(tmp_path / "r"), "--cache", str(tmp_path / "c.sqlite")])
    assert [(s["name"], s["calls"], s["exact"]) for s in plan["stages"]] == [
        ("persona sketches", len(rows), True), ("persona picks", len(rows), False)]
    assert not (tmp_path / "r").exists()
    # an API embedder's calls are planned too: the persona table, then one per sketch (never sent:
    # nothing listens on port 9); unknown vectors make only the picks a guess, not the sketches
    personas = read_jsonl(builtin_path("personas"))
    plan = _plan(capsys, ["construct", "route", "--rows", str(tmp_path / "s" / "screened.jsonl"),
                          "--model", "openai:router@http://127.0.0.1:9/v1",
                          "--embedder", "openai-embed:emb@http://127.0.0.1:9/v1",
                          "--out", str(tmp_path / "r"), "--cache", str(tmp_path / "c.sqlite")])
    assert [(s["name"], s["calls"], s["exact"]) for s in plan["stages"]] == [
        ("embeddings", len(personas) + len(rows), False), ("persona sketches", len(rows), True),
        ("persona picks", len(rows), False)]
    assert not (tmp_path / "r").exists()
