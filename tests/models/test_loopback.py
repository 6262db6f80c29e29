"""The loopback OpenAI endpoint: a URL-only library's calls go through the carebench run.

Driven with the OpenAI SDK (the kind of client MLflow/LiteLLM use), backed by a real
Run whose model is the loopback stub: what reaches the stub, what comes back, the
cache on a second run, and a failure that must not pass for an answer.
"""

from __future__ import annotations

import json

import openai
import pytest

from carebench.engine.options import RunOptions
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.models.loopback import LoopbackEndpoint
from carebench.types import BudgetReached
from stub_server import StubReply, StubServer

SCHEMA = {"type": "object", "properties": {"guidelines": {"type": "array", "items": {"type": "string"}}},
          "required": ["guidelines"], "additionalProperties": False}


def _sdk(ep: LoopbackEndpoint) -> openai.OpenAI:
    return openai.OpenAI(base_url=ep.base_url, api_key="not-a-key", max_retries=0)


def _ask(client: openai.OpenAI) -> openai.types.chat.ChatCompletion:
    return client.chat.completions.create(
        model="whatever", temperature=0.9, max_tokens=7,
        messages=[{"role": "system", "content": "Distil."},
                  {"role": "user", "content": [{"type": "text", "text": "case one"},
                                               {"type": "text", "text": " and two"}]}],
        response_format={"type": "json_schema", "json_schema": {"name": "Guidelines", "schema": SCHEMA,
                                                                "strict": True}},
    )


def _through(run: Run, spec: str):
    model = run.model(spec)
    return lambda req: run.calls([Call(model, req)], "loopback test", stage="distill").completions[0]


def test_chat_goes_through_the_run_and_its_cache(tmp_path):
    answer = json.dumps({"guidelines": ["Ask first."]})
    with StubServer() as stub:
        stub.handler = lambda req: StubReply(content=answer)
        spec = f"openai:judge@{stub.base_url}"
        opts = RunOptions(cache_path=tmp_path / "cache.sqlite", progress=False)
        with Run(opts) as run, LoopbackEndpoint(_through(run, spec), temperature=0.0, max_tokens=4000) as ep:
            assert ep.base_url.startswith("http://127.0.0.1:")
            got = _ask(_sdk(ep))
            rows = list(run.call_rows)
        assert got.choices[0].message.content == answer
        assert got.choices[0].finish_reason == "stop"
        sent = [r.body for r in stub.requests if r.path.endswith("/chat/completions")
                and r.body["messages"][-1]["content"] == "case one and two"]
        assert sent, "the request never reached the model"
        body = sent[-1]
        # the run's decoding settings, not the library's, and the library's schema
        assert body["temperature"] == 0.0 and body["max_tokens"] == 4000
        assert body["messages"][0] == {"role": "system", "content": "Distil."}
        assert body["response_format"]["json_schema"]["name"] == "Guidelines"
        assert body["response_format"]["json_schema"]["schema"] == SCHEMA
        assert len(rows) == 1 and rows[0]["completion"]["text"] == answer  # a calls.jsonl row
        assert ep.chat_calls == 1 and ep.failures == []

        n = len(stub.requests)
        with Run(opts) as run, LoopbackEndpoint(_through(run, spec), temperature=0.0, max_tokens=4000) as ep:
            again = _ask(_sdk(ep))
        assert again.choices[0].message.content == answer
        assert len(stub.requests) == n  # the second run answered from the cache


def test_a_failed_call_is_an_http_error_and_is_kept_for_the_owner():
    asked = []

    def stop(req):
        asked.append(req)
        raise BudgetReached("stopped: budget of $0.01 reached")

    with LoopbackEndpoint(stop) as ep:
        client = _sdk(ep)
        with pytest.raises(openai.BadRequestError, match="budget"):
            _ask(client)
        with pytest.raises(openai.BadRequestError):  # after a stop no further call is made
            _ask(client)
    assert len(asked) == 1
    assert len(ep.failures) == 1 and isinstance(ep.failures[0], BudgetReached)


def test_embeddings_come_from_the_owner():
    def embed(texts):
        return [[float(len(t)), 1.0, -0.5] for t in texts]

    with LoopbackEndpoint(lambda req: None, embed) as ep:
        out = _sdk(ep).embeddings.create(model="e", input=["ab", "abcd"])
        one = _sdk(ep).embeddings.create(model="e", input="xyz")
    assert [d.embedding for d in out.data] == [[2.0, 1.0, -0.5], [4.0, 1.0, -0.5]]
    assert one.data[0].embedding == [3.0, 1.0, -0.5]
    assert ep.embed_calls == 2


def test_malformed_requests_are_rejected_without_a_call():
    calls = []
    with LoopbackEndpoint(calls.append) as ep:
        client = _sdk(ep)
        with pytest.raises(openai.BadRequestError, match="role"):
            client.chat.completions.create(model="m", messages=[{"role": "tool", "content": "x",
                                                                 "tool_call_id": "1"}])
        with pytest.raises(openai.NotFoundError):  # no embedder given
            client.embeddings.create(model="e", input="x")
    assert calls == [] and ep.failures == []
