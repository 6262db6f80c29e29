"""Runner + OpenAI-compatible client against the loopback stub: every fault kind is
retried or recorded as specified, and the cache makes re-runs free."""

from __future__ import annotations

import time

import pytest

from carebench.engine.cache import CompletionCache
from carebench.engine.runner import Call, Ledger, Runner, RunnerConfig
from carebench.models import get_model
from carebench.models.structured import choice_spec
from carebench.types import CarebenchError, ChatRequest, label_probabilities, messages
from stub_server import StubReply, StubServer


def req(text: str, **kw) -> ChatRequest:
    return ChatRequest(messages(("user", text)), **kw)


def make_runner(tmp_path, budget_usd=None, **cfg) -> Runner:
    cfg.setdefault("progress", False)
    cfg.setdefault("backoff_base_s", 0.01)
    return Runner(RunnerConfig(**cfg), cache=CompletionCache(tmp_path / "c.sqlite"), ledger=Ledger(budget_usd=budget_usd))


@pytest.fixture
def stub():
    with StubServer() as s:
        yield s


def model_for(stub, **kw):
    return get_model(f"openai:stub-model@{stub.base_url}", **kw)


def test_basic_completion_fields(stub, tmp_path):
    stub.on_text("hello", StubReply(content="Hi there.", usage=(11, 3)))
    res = make_runner(tmp_path).run_sync([Call(model_for(stub), req("hello"))])
    c = res.completions[0]
    assert c.text == "Hi there." and c.status == "ok" and c.finish_reason == "stop"
    assert (c.usage.prompt_tokens, c.usage.completion_tokens) == (11, 3)
    assert c.latency_s > 0 and c.model.startswith("openai:stub-model@")
    assert stub.requests[0].body["messages"] == [{"role": "user", "content": "hello"}]


def test_429_retry_after_is_honoured(stub, tmp_path):
    stub.script([StubReply(status=429, headers={"Retry-After": "0.3"}), StubReply(content="ok")])
    t0 = time.perf_counter()
    res = make_runner(tmp_path).run_sync([Call(model_for(stub), req("x"))])
    assert time.perf_counter() - t0 >= 0.3
    c = res.completions[0]
    assert c.text == "ok" and c.attempts_made == 2 and len(stub.requests) == 2


def test_500_then_success_and_malformed_body_retried(stub, tmp_path):
    stub.script([StubReply(status=500), StubReply(raw_body=b"{not json"), StubReply(content="fine")])
    res = make_runner(tmp_path).run_sync([Call(model_for(stub), req("x"))])
    assert res.completions[0].text == "fine" and res.completions[0].attempts_made == 3


def test_persistent_malformed_body_is_recorded_not_fatal(stub, tmp_path):
    stub.on_text("bad", StubReply(raw_body=b"<html>oops"))
    runner = make_runner(tmp_path, max_retries=2)
    res = runner.run_sync([Call(model_for(stub), req("bad")), Call(model_for(stub), req("good"))])
    bad, good = res.completions
    assert bad.status == "error" and "malformed JSON" in bad.error and bad.attempts_made == 3
    assert good.status == "ok"
    assert res.errors == 1
    # errors are not cached: a re-run tries again
    res2 = make_runner(tmp_path, max_retries=0).run_sync([Call(model_for(stub), req("bad"))])
    assert res2.provider_calls == 1


def test_hang_past_timeout_is_retried_then_recorded(stub, tmp_path):
    stub.on_text("slow", StubReply(hang=True))
    res = make_runner(tmp_path, timeout_s=0.3, max_retries=1).run_sync([Call(model_for(stub), req("slow"))])
    c = res.completions[0]
    assert c.status == "error" and "timed out" in c.error and c.attempts_made == 2


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (StubReply(content=""), "empty"),
        (StubReply(content="partial", finish_reason="length"), "truncated"),
        (StubReply(content="", finish_reason="content_filter"), "content_filter"),
    ],
)
def test_outcome_flags(stub, tmp_path, reply, status):
    stub.handler = lambda r: reply
    res = make_runner(tmp_path).run_sync([Call(model_for(stub), req("x"))])
    assert res.completions[0].status == status


def test_rerun_makes_zero_provider_calls_and_attempts_are_distinct(stub, tmp_path):
    calls = [Call(model_for(stub), req(f"item {i}", attempt=a)) for i in range(5) for a in range(3)]
    r1 = make_runner(tmp_path).run_sync(calls)
    assert r1.provider_calls == 15 and len(stub.requests) == 15
    r2 = make_runner(tmp_path).run_sync(calls)
    assert r2.provider_calls == 0 and r2.cache_hits == 15 and len(stub.requests) == 15
    assert [c.text for c in r2.completions] == [c.text for c in r1.completions]
    assert all(c.cached for c in r2.completions)


def test_no_cache_calls_again(stub, tmp_path):
    calls = [Call(model_for(stub), req("x"))]
    make_runner(tmp_path).run_sync(calls)
    make_runner(tmp_path, use_cache=False).run_sync(calls)
    assert len(stub.requests) == 2


def test_budget_cap_stops_cleanly(stub, tmp_path, price_per_call):
    price_per_call(1.0, "stub-model")
    stub.handler = lambda r: StubReply(content="ok", usage=(1, 1), delay=0.01)
    calls = [Call(model_for(stub), req(f"i{i}")) for i in range(10)]
    runner = make_runner(tmp_path, concurrency=1, budget_usd=3.0)
    res = runner.run_sync(calls)
    done = [c for c in res.completions if c is not None]
    assert len(done) == 3 and res.spent_usd == pytest.approx(3.0)
    assert res.stopped and "budget" in res.stopped
    assert len(runner.cache) == 3  # everything done so far is kept
    assert stub.count() == 3 and res.not_made == 7


def test_budget_is_one_cap_across_batches_and_in_flight_calls(stub, tmp_path, price_per_call):
    """Concurrency 4, $1 a call, $5 budget: a call starts only if spend plus the worst
    case of the calls in flight stays within the budget, and later batches of the
    same run see the same ledger (no fresh budget per batch)."""
    price_per_call(1.0, "stub-model")
    stub.handler = lambda r: StubReply(content="ok", delay=0.05)
    runner = make_runner(tmp_path, concurrency=4, budget_usd=5.0)
    first = runner.run_sync([Call(model_for(stub), req(f"a{i}")) for i in range(3)])
    assert first.stopped is None and stub.count() == 3
    second = runner.run_sync([Call(model_for(stub), req(f"b{i}")) for i in range(8)])
    assert stub.count() == 5  # 3 + 2: the budget did not reset for the second batch
    assert second.not_made == 6 and runner.ledger.spent_usd == pytest.approx(5.0)
    third = runner.run_sync([Call(model_for(stub), req("a0")), Call(model_for(stub), req("c"))])
    assert third.completions[0] is not None and third.completions[0].cached  # cache still answers
    assert third.completions[1] is None and stub.count() == 5
    assert runner.ledger.not_made == 7


def test_dry_run_plan_counts_and_estimates(stub, tmp_path, monkeypatch):
    prices = tmp_path / "prices.toml"
    prices.write_text('[models]\n"stub-model" = [1.0, 2.0]\n')
    monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
    from carebench.models.pricing import price_table

    price_table.cache_clear()
    runner = make_runner(tmp_path)
    stub.handler = lambda r: StubReply(content="short", usage=(5, 7))
    calls = [Call(model_for(stub), req("x" * 400, max_tokens=100)) for _ in range(1)]
    calls += [Call(model_for(stub), req("y" * 400, max_tokens=100))]
    # nothing cached: replies assumed to fill the output cap (the worst case)
    # 400 chars ~ 100 tokens + 4 framing at $1/M; 100 output tokens at $2/M
    first = runner.plan(calls)
    assert (first.total, first.cached, first.to_make) == (2, 0, 2)
    assert first.estimated_cost_usd == pytest.approx(2 * (104 * 1.0 + 100 * 2.0) / 1e6)
    assert first.by_model[str(model_for(stub).spec)]["reply_lengths"] == "output caps"
    runner.run_sync(calls[:1])
    n_before = len(stub.requests)
    plan = runner.plan(calls)
    assert len(stub.requests) == n_before  # planning calls nothing
    assert (plan.total, plan.cached, plan.to_make) == (2, 1, 1)
    # one cached reply of this model (7 completion tokens): the estimate uses its length
    assert plan.estimated_cost_usd == pytest.approx((104 * 1.0 + 7 * 2.0) / 1e6)
    assert plan.by_model[str(model_for(stub).spec)]["reply_lengths"] == "cached replies"


def test_structured_capability_probe_like_llamacpp_server(tmp_path):
    """Issue 10 item 7: one probe per mode decides the output constraint before the first
    real call; real calls are never sent in a mode the server refused."""
    with StubServer(reject_json_schema=True) as stub:
        stub.handler = lambda r: StubReply(content='{"answer": "c"}')
        model = model_for(stub)
        spec = choice_spec(("a", "b", "c", "d"))
        res = make_runner(tmp_path, concurrency=4).run_sync(
            [Call(model, req(f"p{i}", structured=spec)) for i in range(4)]
        )
        assert [c.text for c in res.completions] == ['{"answer": "c"}'] * 4
        kinds = [r.body.get("response_format", {}).get("type") for r in stub.requests]
        # the first call is the probe: json_schema refused (naming "JSON schema"), then
        # json_object accepted; the other three wait for the decision and never try json_schema
        assert kinds == ["json_schema"] + ["json_object"] * 4
        assert model.structured_mode == "json_object"
        assert [e.get("decided") for e in model.probe_log] == [None, "json_object"]
        assert "schema" in stub.requests[-1].body["response_format"]
        # with a GBNF grammar describing that JSON (llama.cpp's server honours it)
        grammar = stub.requests[-1].body["grammar"]
        assert 'value-answer-kv ::= "\\"answer\\":"' in grammar


def test_a_transient_500_never_downgrades_the_output_format(tmp_path):
    spec = choice_spec(("a", "b", "c", "d"))
    with StubServer() as stub:
        stub.script([StubReply(status=500, content="upstream overloaded")])
        stub.handler = lambda r: StubReply(content='{"answer": "b"}')
        model = model_for(stub)
        res = make_runner(tmp_path, concurrency=1).run_sync(
            [Call(model, req("p1", structured=spec)), Call(model, req("p2", structured=spec))]
        )
        assert [c.text for c in res.completions] == ['{"answer": "b"}'] * 2
        assert model.structured_mode == "json_schema"  # the 500 named no feature: retried
        kinds = {r.body.get("response_format", {}).get("type") for r in stub.requests}
        assert kinds == {"json_schema"}


def test_logprobs_give_label_probabilities(stub, tmp_path):
    stub.handler = lambda r: StubReply(
        content="b", logprobs=[("b", -0.2231, {"b": -0.2231, "a": -1.6094, "x": -3.0})]
    )
    res = make_runner(tmp_path).run_sync(
        [Call(model_for(stub), req("x", logprobs=True, top_logprobs=5))]
    )
    c = res.completions[0]
    assert stub.requests[0].body["logprobs"] is True and stub.requests[0].body["top_logprobs"] == 5
    probs = label_probabilities(c.logprobs, ("a", "b", "c", "d"))
    # exp(-0.2231)=0.8, exp(-1.6094)=0.2 -> normalised over the labels present
    assert probs == pytest.approx({"a": 0.2, "b": 0.8, "c": 0.0, "d": 0.0}, abs=1e-3)
    # logprobs survive the cache round trip
    again = make_runner(tmp_path).run_sync([Call(model_for(stub), req("x", logprobs=True, top_logprobs=5))])
    assert label_probabilities(again.completions[0].logprobs, ("a", "b", "c", "d")) == pytest.approx(probs)


def test_unreachable_server_is_one_clear_error(tmp_path):
    model = get_model("openai:m@http://127.0.0.1:9/v1")
    with pytest.raises(CarebenchError, match="cannot reach"):
        make_runner(tmp_path, max_retries=1).run_sync([Call(model, req("x"))])


def test_auth_failure_stops_the_run(stub, tmp_path):
    stub.handler = lambda r: StubReply(status=401)
    with pytest.raises(CarebenchError, match="rejected the API key"):
        make_runner(tmp_path).run_sync([Call(model_for(stub), req(f"x{i}")) for i in range(4)])


def test_client_error_is_recorded_permanently(stub, tmp_path):
    stub.handler = lambda r: StubReply(status=400)
    res = make_runner(tmp_path).run_sync([Call(model_for(stub), req("x"))])
    assert res.completions[0].status == "error" and "HTTP 400" in res.completions[0].error
    assert len(stub.requests) == 1  # not retried


def test_moderation_scores(stub, tmp_path):
    stub.handler = lambda r: StubReply(
        moderation={"self-harm": 0.4, "self-harm/intent": 0.7, "self-harm/instructions": 0.01}
    )
    model = get_model(f"openai-moderation:omni-moderation-latest@{stub.base_url}")
    res = make_runner(tmp_path).run_sync([Call(model, req("text"))])
    scores = res.completions[0].extra["scores"]
    assert scores == pytest.approx({"self_harm": 0.4, "self_harm_intent": 0.7, "self_harm_instructions": 0.01})
    assert stub.requests[0].path.endswith("/moderations")
    assert stub.requests[0].body["input"] == "text"


def test_anthropic_native(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    stub.handler = lambda r: StubReply(content="cut", finish_reason="length", usage=(5, 2))
    model = get_model(f"anthropic:claude-test@{stub.base_url}")
    r = ChatRequest(messages(("system", "be kind"), ("user", "hi")), max_tokens=20)
    c = make_runner(tmp_path).run_sync([Call(model, r)]).completions[0]
    body = stub.requests[0].body
    assert body["system"] == "be kind" and body["messages"] == [{"role": "user", "content": "hi"}]
    assert stub.requests[0].headers["x-api-key"] == "sk-ant-test-key"
    assert c.text == "cut" and c.status == "truncated" and c.usage.completion_tokens == 2


def test_per_model_concurrency_limit(tmp_path):
    with StubServer() as stub:
        stub.handler = lambda r: StubReply(content="ok", delay=0.1)
        a, b = get_model(f"openai:A@{stub.base_url}"), get_model(f"openai:B@{stub.base_url}")
        runner = make_runner(tmp_path, concurrency=8, concurrency_by_model={str(a.spec): 2})
        calls = [Call(a, req(f"a{i}")) for i in range(6)] + [Call(b, req(f"b{i}")) for i in range(8)]
        runner.run_sync(calls)
        # A limited to 2 in flight: 6 calls take 3 waves of 0.1 s; B's 8 go in one wave
        starts = sorted(r.time for r in stub.requests if r.body["model"] == "A")
        assert starts[2] - starts[0] >= 0.09 and starts[4] - starts[2] >= 0.09
        b_starts = sorted(r.time for r in stub.requests if r.body["model"] == "B")
        assert b_starts[-1] - b_starts[0] < 0.09


def test_runner_reusable_across_run_sync_calls(stub, tmp_path):
    """Semaphores that had to wait in one event loop must not leak into the next run."""
    stub.handler = lambda r: StubReply(content="ok", delay=0.01)
    runner = make_runner(tmp_path, concurrency=1, use_cache=False)
    model = model_for(stub)
    for round_ in range(3):
        res = runner.run_sync([Call(model, req(f"r{round_}-{i}")) for i in range(4)])
        assert all(c.ok for c in res.completions)


def test_identical_calls_in_one_batch_are_made_once(stub, tmp_path):
    stub.handler = lambda r: StubReply(content="shared", delay=0.05)
    model = model_for(stub)
    calls = [Call(model, req("same"), tag=i) for i in range(5)] + [Call(model, req("other"))]
    runner = make_runner(tmp_path)
    assert runner.plan(calls).total == 2
    res = runner.run_sync(calls)
    assert len(stub.requests) == 2 and res.provider_calls == 2 and res.shared == 4
    assert [c.text for c in res.completions[:5]] == ["shared"] * 5


def test_run_accounts_spend_per_stage(stub, tmp_path, price_per_call):
    """The manifest's per-stage figures add up batch by batch: two batches of one stage
    (one repeating a cached call) and one of another, at $1 a provider call."""
    from carebench.engine.options import RunOptions
    from carebench.engine.run import Run

    price_per_call(1.0, "stub-model")
    stub.handler = lambda r: StubReply(content="ok")
    with Run(RunOptions(progress=False, cache_path=tmp_path / "c.sqlite")) as run:
        m = run.model(f"openai:stub-model@{stub.base_url}")
        run.calls([Call(m, req("a")), Call(m, req("b"))], stage="screen")
        run.calls([Call(m, req("a")), Call(m, req("c"))], stage="screen")
        run.calls([Call(m, req("d"))], stage="judge")
        acc = run.accounting()
    assert stub.count() == 4
    assert acc["by_stage"]["screen"] == {"calls": 4, "provider_calls": 3, "cache_hits": 1,
                                         "errors": 0, "spent_usd": 3.0}
    assert acc["by_stage"]["judge"] == {"calls": 1, "provider_calls": 1, "cache_hits": 0,
                                        "errors": 0, "spent_usd": 1.0}


def test_404_from_a_base_url_without_v1_suggests_v1(tmp_path):
    """llama.cpp's server answers {"detail":"Not Found"} at /chat/completions without /v1."""
    with StubServer() as s:
        s.handler = lambda r: StubReply(status=404, raw_body=b'{"detail":"Not Found"}')
        root = s.base_url.removesuffix("/v1")
        bare = make_runner(tmp_path).run_sync([Call(get_model(f"openai:m@{root}"), req("x"))]).completions[0]
        with_v1 = make_runner(tmp_path).run_sync([Call(get_model(f"openai:m@{s.base_url}"), req("y"))]).completions[0]
    assert bare.status == "error"
    assert f"try the base URL {root}/v1, e.g. openai:MODEL@{root}/v1" in bare.error
    assert with_v1.status == "error" and "try the base URL" not in with_v1.error
