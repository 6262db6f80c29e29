"""Model specs, structured-answer parsing, replay and pricing."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, Field

from carebench.engine.cache import CompletionCache
from carebench.engine.rundir import write_jsonl
from carebench.engine.runner import Call, Runner, RunnerConfig, call_row
from carebench.models import get_model, parse_spec
from carebench.models.pricing import cost_usd, price_for
from carebench.models.structured import extract_json, parse_model
from carebench.types import CarebenchError, ChatRequest, Usage, messages
from stub_server import StubReply, StubServer


@pytest.mark.parametrize(
    ("spec", "provider", "model", "base"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("openai:llama3@http://localhost:11434/v1/", "openai", "llama3", "http://localhost:11434/v1"),
        ("anthropic:claude-haiku-4-5", "anthropic", "claude-haiku-4-5", None),
        ("llamacpp:builtin", "llamacpp", "builtin", None),
        ("llamacpp:/models/x@y.gguf", "llamacpp", "/models/x@y.gguf", None),
        ("replay:runs/x", "replay", "runs/x", None),
        ("openai-moderation:omni-moderation-latest", "openai-moderation", "omni-moderation-latest", None),
    ],
)
def test_parse_spec(spec, provider, model, base):
    ms = parse_spec(spec)
    assert (ms.provider, ms.model, ms.base_url) == (provider, model, base)


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("gpt-4o", "malformed model spec"),
        ("foo:bar", "unknown model provider 'foo'"),
        ("openai:m@localhost:8000", "malformed base URL"),
        ("openai:", "malformed model spec"),
    ],
)
def test_bad_specs_are_clear_errors(spec, msg):
    with pytest.raises(CarebenchError, match=msg):
        parse_spec(spec)


def test_missing_keys_are_clear_errors():
    with pytest.raises(CarebenchError, match="OPENAI_API_KEY is not set"):
        get_model("openai:gpt-4o")
    with pytest.raises(CarebenchError, match="ANTHROPIC_API_KEY is not set"):
        get_model("anthropic:claude-haiku-4-5")
    get_model("openai:local@http://127.0.0.1:1/v1")  # local servers need no key


class Profile(BaseModel):
    plan: int = Field(ge=0, le=3)
    note: str


def test_parse_model_valid_and_invalid():
    ok = parse_model('Here: {"plan": 2, "note": "x"} done', Profile)
    assert ok.ok and ok.value.plan == 2
    bad = parse_model('{"plan": 7, "note": "x"}', Profile)
    assert not bad.ok and "plan" in bad.error
    none = parse_model("no json", Profile)
    assert not none.ok
    assert extract_json('x {"a": {"b": 1}} y') == {"a": {"b": 1}}


def test_pricing_exact_or_alias_never_by_prefix(tmp_path, monkeypatch):
    # list prices (USD per 1M tokens) from the providers' pages, as in prices.toml
    assert price_for("openai:gpt-4o-mini") == (0.15, 0.60)
    assert price_for("openai:gpt-4o-mini-2024-07-18") == (0.15, 0.60)  # listed alias
    assert price_for("openai:gpt-5.5") is None  # not gpt-5
    assert price_for("openai:gpt-4o-mini-2024") is None  # not a listed snapshot
    assert price_for("openai:stub-model@http://127.0.0.1:1/v1") is None
    assert cost_usd("openai:gpt-5.5", Usage(1000, 1000)) is None  # never $0
    assert price_for("llamacpp:builtin") == (0.0, 0.0)
    assert cost_usd("openai:gpt-4o", Usage(1_000_000, 100_000)) == pytest.approx(2.5 + 1.0)
    f = tmp_path / "p.toml"
    f.write_text('[models]\n"my-model" = [1.0, 3.0]\n[aliases]\n"my-model-v2" = "my-model"\n')
    monkeypatch.setenv("CAREBENCH_PRICES", str(f))
    from carebench.models.pricing import price_table

    price_table.cache_clear()
    assert price_for("openai:my-model@http://x/v1") == (1.0, 3.0)
    assert price_for("openai:my-model-v2") == (1.0, 3.0)
    f.write_text('[aliases]\n"x" = "nowhere"\n')
    price_table.cache_clear()
    with pytest.raises(CarebenchError, match="has no price"):
        price_for("openai:x")
    f.write_text("[models]\nbroken = 1\n")
    price_table.cache_clear()
    with pytest.raises(CarebenchError, match="must be"):
        price_for("openai:x")


def test_replay_answers_recorded_calls_and_refuses_unrecorded(tmp_path):
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content="recorded " + r.body["messages"][-1]["content"])
        model = get_model(f"openai:stub@{stub.base_url}")
        calls = [Call(model, ChatRequest(messages(("user", f"q{i}")), attempt=i % 2)) for i in range(4)]
        res = Runner(RunnerConfig(progress=False), cache=CompletionCache(tmp_path / "c")).run_sync(calls)
    write_jsonl(tmp_path / "calls.jsonl", [call_row(c, comp) for c, comp in zip(calls, res.completions, strict=True)])
    replay = get_model(f"replay:{tmp_path}")
    runner = Runner(RunnerConfig(progress=False), cache=None)
    out = runner.run_sync([Call(replay, c.request) for c in calls])
    assert [c.text for c in out.completions] == [f"recorded q{i}" for i in range(4)]
    miss = runner.run_sync([Call(replay, ChatRequest(messages(("user", "never asked"))))])
    assert miss.completions[0].status == "error" and "no recorded completion" in miss.completions[0].error
    # attempt index is part of the match
    other = runner.run_sync([Call(replay, ChatRequest(messages(("user", "q0")), attempt=1))])
    assert other.completions[0].status == "error"


def test_replay_handwritten_jsonl_and_bad_files(tmp_path):
    f = tmp_path / "answers.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "text": "hello"}) + "\n")
    replay = get_model(f"replay:{f}")
    out = Runner(RunnerConfig(progress=False), cache=None).run_sync(
        [Call(replay, ChatRequest(messages(("user", "hi"))))]
    )
    assert out.completions[0].text == "hello"
    with pytest.raises(CarebenchError, match="not found"):
        get_model(f"replay:{tmp_path / 'nope.jsonl'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(CarebenchError, match="bad.jsonl:1"):
        get_model(f"replay:{bad}")
