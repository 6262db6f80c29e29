"""What the importer stores is what a live call stores: the cache row of an imported answer
equals, byte for byte, the row the live call for the same request wrote, with only the
fields a batch answer documents as its own (latency 0, no queue wait, the batch price, the
``batch`` marker); and the importer's direct path for chat bodies writes the same bytes as
the live client's parser and the cache's encoder, for every shape it takes."""

from __future__ import annotations

import json
import sqlite3

import pytest

from batch.fake_run_batch import fake_run_batch
from carebench.batch.formats import CHAT, completion_from, stored_for
from carebench.batch.import_ import import_results
from carebench.batch.manifest import Manifest
from carebench.batch.options import BatchOptions
from carebench.engine.cache import CompletionCache, encode_completion
from carebench.engine.options import RunOptions
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.types import BatchPending, ChatRequest, messages
from stub_server import StubReply, StubServer

TEXT = 'Je t\'écoute, "vraiment".\nYou are not alone \U0001f499 \\ \t\u2028'


def _rows(path) -> dict[str, tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        return {k: (m, c) for k, m, c in conn.execute("SELECT key, model, completion FROM completions")}


@pytest.mark.parametrize("reply", [
    StubReply(content=TEXT, usage=(37, 11), reasoning_tokens=3),
    StubReply(content="cut sho", finish_reason="length", usage=(5, 64)),
    StubReply(content="", finish_reason="content_filter", usage=(5, 0)),
    StubReply(logprobs=[("yes", -0.1, {"no": -2.3})], usage=(9, 1)),  # logprobs: the parser's path
])
def test_imported_row_is_the_live_row(tmp_path, monkeypatch, reply):
    from carebench.models.pricing import price_table

    prices = tmp_path / "prices.toml"
    prices.write_text('[models]\n"stub" = [2.0, 8.0]\n')  # so $1 and $4 per 1M tokens through a batch
    monkeypatch.setenv("CAREBENCH_PRICES", str(prices))
    price_table.cache_clear()
    req = ChatRequest(messages(("system", "Be kind."), ("user", "I feel alone.")), max_tokens=64,
                      logprobs=reply.logprobs is not None, top_logprobs=1 if reply.logprobs else None)
    with StubServer() as stub:
        stub.handler = lambda r: reply
        spec = f"openai:stub@{stub.base_url}"
        run = Run(RunOptions(cache_path=tmp_path / "live.sqlite", progress=False))
        assert run.calls([Call(run.model(spec), req)]).completions[0].error is None
        run = Run(RunOptions(cache_path=tmp_path / "batch.sqlite", progress=False,
                             batch=BatchOptions(tmp_path / "bdir", "vllm")))
        run.calls([Call(run.model(spec), req)])
        with pytest.raises(BatchPending):
            run.finish()
        (entry,) = Manifest.load(tmp_path / "bdir").rounds[0]["files"]
        fake_run_batch(tmp_path / "bdir" / entry["path"], tmp_path / "out.jsonl", lambda r: reply)
        counts = import_results(tmp_path / "bdir", [tmp_path / "out.jsonl"], CompletionCache(tmp_path / "batch.sqlite"))
        assert counts.imported == 1
    (key, (model, live)), = _rows(tmp_path / "live.sqlite").items()
    assert _rows(tmp_path / "batch.sqlite").keys() == {key}  # the same cache key
    imported_model, imported = _rows(tmp_path / "batch.sqlite")[key]
    d = json.loads(live)
    pt, ct = d["usage"]["prompt_tokens"], d["usage"]["completion_tokens"]
    assert d["cost_usd"] == pytest.approx((pt * 2.0 + ct * 8.0) / 1e6)
    # the batch answer's own fields, by hand: no latency, no queue wait, half the price, marked
    d.update(latency_s=0.0, queue_wait_s=None, cost_usd=(pt * 1.0 + ct * 4.0) / 1e6, batch=True)
    assert imported == json.dumps(d, ensure_ascii=False) and imported_model == model == spec


BODY = {"id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT}, "logprobs": None,
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 22, "completion_tokens": 2, "total_tokens": 24,
                  "completion_tokens_details": {"reasoning_tokens": 1}}}


def _variant(**change):
    body = json.loads(json.dumps(BODY))
    choice = body["choices"][0]
    for k, v in change.items():
        if k == "content":
            choice["message"]["content"] = v
        elif k == "usage":
            body["usage"] = v
        else:
            choice[k] = v
    return body


@pytest.mark.parametrize("body", [
    BODY, _variant(finish_reason="length"), _variant(finish_reason="MAX_TOKENS"), _variant(content="  "),
    _variant(finish_reason="refusal", content=""), _variant(finish_reason=None), _variant(usage=None),
    _variant(usage={"prompt_tokens": 3}), _variant(usage={"prompt_tokens": 3, "completion_tokens": 4,
                                                          "completion_tokens_details": None}),
    _variant(usage={"prompt_tokens": 3.0, "completion_tokens": 4}),  # not ints: the parser's path
    _variant(content=None), _variant(logprobs={"content": [{"token": "a", "logprob": -0.5, "top_logprobs": []}]}),
    _variant(logprobs={"content": []}),
])
@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai:unpriced-model@http://h/v1", "vllm:m"])
def test_direct_chat_rows_equal_the_parsers(body, spec):
    assert stored_for(CHAT, spec)(body) == encode_completion(completion_from(CHAT, spec, body))


def test_documented_chat_bodies_take_the_direct_path(monkeypatch):
    import carebench.engine.cache

    def no(*a):
        raise AssertionError("the parser's path")

    monkeypatch.setattr(carebench.engine.cache, "encode_completion", no)
    build = stored_for(CHAT, "openai:gpt-4o-mini")
    for body in (BODY, _variant(finish_reason="length"), _variant(usage=None), _variant(logprobs={"content": []})):
        assert json.loads(build(body))["batch"] is True
    with pytest.raises(AssertionError, match="the parser's path"):
        build(_variant(content=None))
