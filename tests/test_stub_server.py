"""The loopback stub must behave like the real APIs as their SDKs see them, or client
tests built on it prove nothing. Each test checks the stub against an independent
expectation: the OpenAI/Anthropic SDKs' own parsers, hand-computed word counts, and
wall-clock bounds for delays, hangs and concurrency.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time

import httpx
import openai
import pytest

from stub_server import MODERATION_CATEGORIES, StubReply, StubRequest, StubServer

USER = "I have been feeling really low these past weeks and cannot sleep"
MSGS = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "hello there"},
    {"role": "assistant", "content": "hi"},
    {"role": "user", "content": USER},
]


@pytest.fixture
def stub():
    with StubServer() as server:
        yield server
    assert server.errors == []


def oai(stub: StubServer, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=stub.base_url, api_key="sk-test", max_retries=0, **kw)


def chat(client: httpx.Client, content: str = USER, **extra) -> httpx.Response:
    body = {"model": "m1", "messages": [{"role": "user", "content": content}], **extra}
    return client.post("/chat/completions", json=body)


def test_default_echo_usage_and_record(stub):
    resp = oai(stub).chat.completions.create(model="gpt-test", messages=MSGS)
    assert resp.model == "gpt-test"
    assert resp.object == "chat.completion"
    assert resp.choices[0].message.content == "stub: " + USER[:40]
    assert resp.choices[0].finish_reason == "stop"
    assert resp.choices[0].logprobs is None
    # Word counts worked by hand: 5 + 2 + 1 + 12 prompt words; "stub: I have been feeling
    # really low these past" is 9 words.
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (20, 9)
    assert resp.usage.total_tokens == 29

    [req] = stub.requests
    assert req.method == "POST" and req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.headers["content-type"] == "application/json"
    assert req.body["messages"] == MSGS
    assert (req.index, req.n) == (0, 0)
    assert req.text == USER
    assert req.time <= time.monotonic()


def test_identical_bodies_counted_and_keep_alive(stub):
    with httpx.Client(base_url=stub.base_url) as client:
        for content in ("a", "b", "a", "a"):
            assert chat(client, content).status_code == 200
    reqs = stub.requests
    assert [r.n for r in reqs] == [0, 0, 1, 2]
    assert [r.index for r in reqs] == [0, 1, 2, 3]
    assert len({r.conn for r in reqs}) == 1  # one kept-alive connection
    assert stub.count() == 4
    assert stub.count(lambda r: r.text == "a") == 3


def test_script_then_rules_then_handler_then_default(stub):
    stub.handler = lambda req: StubReply(content=f"handler #{req.index}")
    stub.on_text("rate", StubReply(content="rule"))
    stub.on_text("fn", lambda req: f"fn saw {req.text!r}")
    stub.script([StubReply(content="first"), "second", lambda req: None])
    with httpx.Client(base_url=stub.base_url) as client:
        texts = [
            chat(client, c).json()["choices"][0]["message"]["content"]
            for c in ("rate me", "x", "y", "rate me", "call fn", "other")
        ]
    # The scripted None falls through to the default echo.
    assert texts == ["first", "second", "stub: y", "rule", "fn saw 'call fn'", "handler #5"]
    stub.handler = None
    with httpx.Client(base_url=stub.base_url) as client:
        assert chat(client, "zzz").json()["choices"][0]["message"]["content"] == "stub: zzz"


def test_429_with_retry_after(stub):
    stub.script([StubReply(status=429, headers={"Retry-After": "0.1"}, content="slow down")])
    client = oai(stub)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="m", messages=MSGS)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "0.1"
    assert "slow down" in str(info.value)
    # The script is used up: the next call succeeds.
    assert client.chat.completions.create(model="m", messages=MSGS).choices[0].message.content
    assert stub.count() == 2


def test_500_and_400_statuses(stub):
    stub.script([StubReply(status=500), StubReply(status=400, content="bad param")])
    client = oai(stub)
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(model="m", messages=MSGS)
    with pytest.raises(openai.BadRequestError, match="bad param"):
        client.chat.completions.create(model="m", messages=MSGS)


def test_raw_malformed_body(stub):
    stub.script([StubReply(raw_body='{"choices": [ not json')])
    with httpx.Client(base_url=stub.base_url) as client:
        r = chat(client)
    assert r.status_code == 200
    assert r.content == b'{"choices": [ not json'
    with pytest.raises(ValueError):
        r.json()


def test_hang_times_out_client_and_server_keeps_serving(stub):
    stub.script([StubReply(hang=True)])
    with httpx.Client(base_url=stub.base_url, timeout=0.3) as client:
        t0 = time.monotonic()
        with pytest.raises(httpx.ReadTimeout):
            chat(client)
        elapsed = time.monotonic() - t0
        assert 0.25 <= elapsed < 2.0
        assert chat(client, "after").json()["choices"][0]["message"]["content"] == "stub: after"
    assert stub.count() == 2


def test_drop_closes_without_answer(stub):
    stub.script([StubReply(drop=True)])
    with httpx.Client(base_url=stub.base_url) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            chat(client)
        assert chat(client).status_code == 200
    first, second = stub.requests
    assert first.conn != second.conn  # the dropped connection was not reused


def test_delay_is_applied(stub):
    stub.script([StubReply(delay=0.2)])
    with httpx.Client(base_url=stub.base_url) as client:
        t0 = time.monotonic()
        chat(client)
        assert time.monotonic() - t0 >= 0.19


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_finish_reasons_via_sdk(stub, reason):
    stub.script([StubReply(content="partial", finish_reason=reason, usage=(7, 3))])
    resp = oai(stub).chat.completions.create(model="m", messages=MSGS)
    assert resp.choices[0].finish_reason == reason
    assert resp.choices[0].message.content == "partial"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (7, 3)


def test_logprobs_parsed_by_sdk(stub):
    stub.script(
        [StubReply(logprobs=[("2", math.log(0.7), {"1": math.log(0.2), "3": math.log(0.1)})])]
    )
    resp = oai(stub).chat.completions.create(
        model="m", messages=MSGS, logprobs=True, top_logprobs=3
    )
    choice = resp.choices[0]
    assert choice.message.content == "2"  # content defaults to the joined tokens
    [tok] = choice.logprobs.content
    assert tok.token == "2" and tok.logprob == pytest.approx(math.log(0.7))
    assert tok.bytes == [ord("2")]
    # The chosen token is included in top_logprobs, sorted by probability like OpenAI.
    assert [t.token for t in tok.top_logprobs] == ["2", "1", "3"]
    probs = [math.exp(t.logprob) for t in tok.top_logprobs]
    assert probs == pytest.approx([0.7, 0.2, 0.1])


def test_moderation_endpoint(stub):
    stub.on_text("hurt myself", StubReply(moderation={"self-harm": 0.91, "self-harm/intent": 0.6}))
    client = oai(stub)
    res = client.moderations.create(model="omni-moderation-latest", input="I want to hurt myself")
    [result] = res.results
    assert result.category_scores.self_harm == pytest.approx(0.91)
    assert result.category_scores.self_harm_intent == pytest.approx(0.6)
    assert result.category_scores.self_harm_instructions == 0.0
    assert result.categories.self_harm and result.categories.self_harm_intent
    assert not result.categories.self_harm_instructions
    assert result.flagged
    assert res.model == "omni-moderation-latest"

    # Default: every category present with score 0 and nothing flagged, one result per input.
    res = client.moderations.create(input=["fine day", "another"])
    assert len(res.results) == 2
    raw = res.results[0].model_dump(by_alias=True)["category_scores"]
    assert set(raw) == set(MODERATION_CATEGORIES)
    assert not any(raw.values()) and not res.results[1].flagged

    # Per-input scores.
    stub.script([StubReply(moderation=[{"self-harm": 0.2}, {"self-harm/instructions": 0.7}])])
    a, b = client.moderations.create(input=["x", "y"]).results
    assert (a.flagged, b.flagged) == (False, True)
    assert b.categories.self_harm_instructions

    # An unknown category is a test bug: visible as a 500 and in stub.errors.
    stub.script([StubReply(moderation={"selfharm": 1.0})])
    with pytest.raises(openai.InternalServerError, match="unknown moderation categories"):
        client.moderations.create(input="x")
    assert len(stub.errors) == 1
    stub.errors.clear()


def test_anthropic_messages_endpoint(stub):
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=stub.root_url, api_key="sk-test", max_retries=0)
    msg = client.messages.create(
        model="claude-test",
        max_tokens=50,
        system="Be kind.",
        messages=[{"role": "user", "content": "hello there friend"}],
    )
    assert msg.model == "claude-test"
    assert msg.content[0].type == "text" and msg.content[0].text == "stub: hello there friend"
    assert msg.stop_reason == "end_turn"
    # "Be kind." + "hello there friend" = 5 words; the echo is 4 words.
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (5, 4)
    [req] = stub.requests
    assert req.path == "/v1/messages" and "anthropic-version" in req.headers
    # Older SDKs send x-api-key, newer ones a bearer token.
    assert "sk-test" in (req.headers.get("x-api-key"), req.headers.get("authorization", "")[7:])

    stub.script(
        [
            StubReply(content="cut", finish_reason="length"),
            StubReply(content="", finish_reason="content_filter"),
            StubReply(status=429, headers={"retry-after": "1"}),
        ]
    )
    kw = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    assert client.messages.create(**kw).stop_reason == "max_tokens"
    assert client.messages.create(**kw).stop_reason == "refusal"
    with pytest.raises(anthropic.RateLimitError) as info:
        client.messages.create(**kw)
    assert info.value.body["error"]["type"] == "rate_limit_error"


def test_reject_json_schema_like_llamacpp():
    schema = {"type": "object", "properties": {"level": {"type": "integer"}}}
    rf_schema = {"type": "json_schema", "json_schema": {"name": "risk", "schema": schema}}
    with StubServer(reject_json_schema=True) as stub:
        stub.script([StubReply(content="scripted")])
        client = oai(stub)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(model="m", messages=MSGS, response_format=rf_schema)
        ok = client.chat.completions.create(
            model="m", messages=MSGS, response_format={"type": "json_object"}
        )
        # The rejection did not consume the scripted reply.
        assert ok.choices[0].message.content == "scripted"
        ok = client.chat.completions.create(
            model="m", messages=MSGS, extra_body={"grammar": 'root ::= "1" | "2"'}
        )
        assert ok.choices[0].finish_reason == "stop"
        assert stub.count() == 3
        assert stub.requests[2].body["grammar"] == 'root ::= "1" | "2"'
    with StubServer() as stub:  # without the option json_schema is accepted
        resp = oai(stub).chat.completions.create(
            model="m", messages=MSGS, response_format=rf_schema
        )
        assert resp.choices[0].message.content


def test_models_unknown_route_and_bad_json(stub):
    assert [m.id for m in oai(stub).models.list()] == ["stub-model"]
    with httpx.Client(base_url=stub.root_url) as client:
        assert client.post("/v1/audio/speech", json={}).status_code == 404
        r = client.post(
            "/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400 and "error" in r.json()
        # Without the /v1 prefix, as llama.cpp's server also allows.
        assert chat(client).json()["object"] == "chat.completion"
    assert stub.requests[2].body is None and stub.requests[2].raw == b"{nope"


def test_handler_exception_becomes_500(stub):
    def broken(req: StubRequest) -> StubReply:
        raise KeyError("oops")

    stub.handler = broken
    with httpx.Client(base_url=stub.base_url) as client:
        r = chat(client)
    assert r.status_code == 500 and "oops" in r.json()["error"]["message"]
    assert isinstance(stub.errors.pop(), KeyError)


def test_chunked_request_body_and_connection_close(stub):
    def chunks():
        yield b'{"model": "m", "messages": [{"role": "user", '
        yield b'"content": "chunked hello"}]}'

    with httpx.Client(base_url=stub.base_url) as client:
        r = client.post("/chat/completions", content=chunks(), headers={"connection": "close"})
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "stub: chunked hello"
    assert r.headers["connection"] == "close"
    [req] = stub.requests
    assert req.headers["transfer-encoding"] == "chunked"


def test_expect_100_continue_on_raw_socket(stub):
    body = b'{"messages": [{"role": "user", "content": "raw"}]}'
    with socket.create_connection(("127.0.0.1", stub.port), timeout=5) as sock:
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode())
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        data = b""
        while b"stub: raw" not in data:
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")


def test_n_choices(stub):
    resp = oai(stub).chat.completions.create(model="m", messages=MSGS, n=3)
    assert [c.index for c in resp.choices] == [0, 1, 2]


def test_async_with_on_running_loop():
    async def main() -> list[str]:
        async with StubServer() as stub:
            stub.script(["one"])
            async with httpx.AsyncClient(base_url=stub.base_url) as client:
                rs = [await client.post("/chat/completions", json={"messages": []}) for _ in "ab"]
            return [r.json()["choices"][0]["message"]["content"] for r in rs]

    assert asyncio.run(main()) == ["one", "stub: "]


def test_concurrency_64_with_delay(stub):
    """64 requests are served at once, and 200 requests at concurrency 64 with 50 ms
    latency finish far below the 10 s a serial server needs."""
    n, conc, delay = 200, 64, 0.05
    # Several small clients: one httpx pool with 64 connections has O(connections^2)
    # bookkeeping per request (encode/httpcore#1035) that would dominate the timing.
    shards = 8

    async def main() -> tuple[list[float], float]:
        limits = httpx.Limits(max_connections=conc // shards)
        clients = [httpx.AsyncClient(base_url=stub.base_url, limits=limits) for _ in range(shards)]
        sem = asyncio.Semaphore(conc)

        async def one(i: int) -> int:
            async with sem:
                r = await clients[i % shards].post(
                    "/chat/completions", json={"messages": [{"role": "user", "content": str(i)}]}
                )
                return r.status_code

        await asyncio.gather(*(one(i) for i in range(conc)))  # open the connections
        # Width: 64 requests held for 1 s each. A server with k < 64 workers would read
        # request k+1 only after a 1 s reply had ended.
        stub.reset()
        stub.handler = lambda req: StubReply(delay=1.0)
        assert await asyncio.gather(*(one(i) for i in range(conc))) == [200] * conc
        arrivals = [r.time for r in stub.requests]
        # Throughput.
        stub.reset()
        stub.handler = lambda req: StubReply(delay=delay)
        t0 = time.monotonic()
        codes = await asyncio.gather(*(one(i) for i in range(n)))
        elapsed = time.monotonic() - t0
        for c in clients:
            await c.aclose()
        assert codes == [200] * n
        return arrivals, elapsed

    arrivals, elapsed = asyncio.run(main())
    assert len(arrivals) == conc
    assert max(arrivals) - min(arrivals) < 1.0  # all 64 were read while the first slept
    reqs = stub.requests
    assert len(reqs) == n and len({r.conn for r in reqs}) <= conc
    # Typically 0.4 s; the bound leaves room for a loaded CI machine.
    assert elapsed < 4.0, elapsed
