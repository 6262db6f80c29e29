"""The shapes of batch request and result lines, for OpenAI's Batch API, Anthropic's
Message Batches and vLLM's ``run_batch``.

A request's body comes from the same functions the live clients post
(``chat_body``, ``embedding_body``, ``messages_body``) and a result's completion from
the same parsers they read responses with (``parse_chat``, ``parse_embeddings``,
``parse_messages``), so a batch answer is the answer the live call would have given
for the same response body; only the price (the batch rate), latency (none) and the
``batch`` marker differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from carebench.models.base import ModelSpec
from carebench.types import CarebenchError, ChatRequest, Completion, flags_for, status_of

CHAT, EMBEDDINGS, MESSAGES = "/v1/chat/completions", "/v1/embeddings", "/v1/messages"
#: which result-line shape each request format comes back in
RESULT_SHAPE = {"openai": "openai", "vllm": "openai", "anthropic": "anthropic"}
ANTHROPIC_RESULTS = ("succeeded", "errored", "canceled", "expired")


def file_format(spec: ModelSpec, requested: str | None) -> str | None:
    """The request-file format for a model's calls, or None when its calls are made live
    (in-process and replayed models cost nothing; moderation is free and has no batch
    route here). ``vllm`` applies to self-hosted ``openai:MODEL@URL`` models; models on
    OpenAI itself stay in OpenAI's format. A ``vllm:`` model always gets ``vllm`` files."""
    p = spec.provider
    if p == "anthropic":
        return "anthropic"
    if p == "vllm":  # the spec names the server: always run_batch input
        if requested == "anthropic":
            raise CarebenchError(f"--batch-format anthropic: {spec} is a vLLM model (use vllm)")
        return "vllm"
    if p in ("openai", "openai-embed"):
        if requested == "anthropic":
            raise CarebenchError(f"--batch-format anthropic: {spec} is an OpenAI-compatible model "
                                 "(use openai or vllm)")
        return "vllm" if requested == "vllm" and spec.base_url else "openai"
    return None


def body_builder(model: Any) -> Callable[[ChatRequest], tuple[str, dict[str, Any]]]:
    """``request -> (endpoint, body)`` for one model (its options looked up once)."""
    spec: ModelSpec = model.spec
    opts = getattr(model, "request_options", None) or None
    name = spec.model
    if spec.provider == "anthropic":
        from carebench.models.anthropic_native import messages_body

        return lambda request: (MESSAGES, messages_body(name, request, opts))
    if spec.provider == "openai-embed":
        from carebench.models.openai_compat import embedding_body

        return lambda request: (EMBEDDINGS, embedding_body(
            name, [request.messages[-1].content if request.messages else ""], request.max_tokens))
    from carebench.models.openai_compat import chat_body

    # no capability probe in a batch: a model that already decided keeps its mode, a model
    # given ``output=`` (--model-option) takes it; else json_schema, which OpenAI's Batch
    # API and vLLM both take
    structured = (getattr(model, "structured_mode", None)
                  or getattr(getattr(model, "request_options", None), "output", None) or "json_schema")
    return lambda request: (CHAT, chat_body(name, request, "none" if request.structured is None else structured,
                                            opts))


def request_line(fmt: str, custom_id: str, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
    """One line of a request file (OpenAI batch JSONL, which vLLM's run_batch reads too;
    or one Message Batches request)."""
    if fmt == "anthropic":
        return {"custom_id": custom_id, "params": body}
    return {"custom_id": custom_id, "method": "POST", "url": endpoint, "body": body}


@dataclass(slots=True)
class Result:
    """One result line read: the answer's HTTP body, or why there is none."""

    custom_id: str
    shape: str  # "openai" (OpenAI and vLLM output/error files) or "anthropic"
    body: dict[str, Any] | None
    error: str | None


def read_result(obj: Any) -> Result | None:
    """A result line in any of the documented shapes; None if it is none of them."""
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        return None
    cid = obj["custom_id"]
    if "result" in obj:
        r = obj["result"]
        kind = r.get("type") if isinstance(r, dict) else None
        if kind not in ANTHROPIC_RESULTS:
            return None
        if kind == "succeeded":
            msg = r.get("message")
            return Result(cid, "anthropic", msg, None if isinstance(msg, dict) else "succeeded without a message")
        if kind == "errored":
            err = r.get("error") or {}
            inner = err.get("error") if isinstance(err, dict) and isinstance(err.get("error"), dict) else err
            return Result(cid, "anthropic", None, f"batch request errored: {_message(inner)}")
        return Result(cid, "anthropic", None, f"batch request {kind}")
    if "response" not in obj and "error" not in obj:
        return None
    resp, err = obj.get("response"), obj.get("error")
    if resp is not None and not isinstance(resp, dict):
        return None
    status = resp.get("status_code") if resp else None
    body = resp.get("body") if resp else None
    if err is None and isinstance(status, int) and 200 <= status < 300 and isinstance(body, dict):
        return Result(cid, "openai", body, None)
    if err is None and isinstance(body, dict) and "error" in body:
        err = body["error"]
    reason = _message(err) if err is not None else "no response body"
    return Result(cid, "openai", None, f"batch request failed (HTTP {status}): {reason}" if status
                  else f"batch request failed: {reason}")


def _message(err: Any) -> str:
    """The readable reason of an error object: OpenAI's ``{"message", "code", "type"}``,
    vLLM's ``ErrorResponse`` nested as ``{"error": {"message", "type", "code": 400}}`` (or
    flat, in older releases), or a plain string (vLLM's own failures)."""
    if isinstance(err, dict) and isinstance(err.get("error"), dict | str) and not isinstance(err.get("message"), str):
        return _message(err["error"])
    if isinstance(err, dict):
        for k in ("message", "code", "type"):
            if isinstance(err.get(k), str) and err[k]:
                return " ".join(err[k].split())[:300]
        return "unknown error"
    return " ".join(str(err).split())[:300] or "unknown error"


def completion_from(endpoint: str, spec: str, body: dict[str, Any]) -> Completion:
    """The completion of a successful result, parsed as the live client parses a response,
    priced at the model's batch rate and marked ``batch``. Raises TransientError when the
    body is not a usable response (recorded as the call's error, retried next round)."""
    return parser_for(endpoint, spec)(body)


def parser_for(endpoint: str, spec: str) -> Callable[[dict[str, Any]], Completion]:
    """``body -> Completion`` for one request file's results (see :func:`completion_from`),
    with the parser and the batch price looked up once."""
    from carebench.models.pricing import batch_price

    if endpoint == MESSAGES:
        from carebench.models.anthropic_native import parse_messages

        def parse(body: dict[str, Any]) -> Completion:
            return parse_messages(body, spec, 0.0)
    elif endpoint == EMBEDDINGS:
        from carebench.models.openai_compat import parse_embeddings

        def parse(body: dict[str, Any]) -> Completion:
            return parse_embeddings(body, 1, spec, 0.0)[0]
    elif endpoint == CHAT:
        from carebench.models.openai_compat import parse_chat

        def parse(body: dict[str, Any]) -> Completion:
            return parse_chat(body, spec, 0.0)
    else:
        raise CarebenchError(f"no parser for batch endpoint {endpoint}")
    price = batch_price(spec)

    def batch_completion(body: dict[str, Any]) -> Completion:
        comp = parse(body)
        u = comp.usage
        if price is None:
            comp.cost_usd, comp.priced = 0.0, False
        else:
            comp.cost_usd = (u.prompt_tokens * price[0] + u.completion_tokens * price[1]) / 1e6 + price[2]
            comp.priced = True
        comp.batch = True
        return comp

    return batch_completion


def stored_for(endpoint: str, spec: str) -> Callable[[dict[str, Any]], str]:
    """``body -> the cache row`` (the completion's JSON, exactly as ``CompletionCache``
    stores the completion of :func:`parser_for`) for one request file's results.

    A chat-completions body in its documented shape (``choices[0].message.content`` a
    string, no logprobs, integer usage) is written straight into the row; every other
    body goes through the live client's parser and the cache's encoder. The two give the
    same bytes (tests/batch/test_import_rows.py); the direct path spares a million-line
    import building and re-encoding a million ``Completion`` objects."""
    from carebench.engine.cache import encode_completion

    parse = parser_for(endpoint, spec)

    def general(body: dict[str, Any]) -> str:
        return encode_completion(parse(body))

    if endpoint != CHAT:
        return general
    from carebench.models.pricing import batch_price

    price = batch_price(spec)
    tail = f', "model": {encode_basestring(spec)}, "status": "'
    return lambda body: _chat_row(body, price, tail) or general(body)


def _chat_row(body: dict[str, Any], price: Any, tail: str) -> str | None:
    """The cache row of a documented chat body (see :func:`stored_for`); None for any other
    shape. Mirrors ``parse_chat`` + ``Completion.to_dict`` + the cache's JSON encoder
    (default separators, ``ensure_ascii=False``)."""
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"]
        finish = choice.get("finish_reason")
        lp = choice.get("logprobs")
        u = body.get("usage") or {}
        pt = u.get("prompt_tokens") or 0
        ct = u.get("completion_tokens") or 0
        details = u.get("completion_tokens_details") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    rt = (details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0
    if (type(text) is not str or (finish is not None and type(finish) is not str)
            or (isinstance(lp, dict) and lp.get("content")) or type(pt) is not int or type(ct) is not int
            or type(rt) is not int):
        return None
    flags = flags_for(text, finish)
    status = status_of(flags, None)
    cost = "null" if price is None else repr((pt * price[0] + ct * price[1]) / 1e6 + price[2])
    return (f'{{"text": {encode_basestring(text)}, "finish_reason": '
            f'{"null" if finish is None else encode_basestring(finish)}, "usage": {{"prompt_tokens": {pt}, '
            f'"completion_tokens": {ct}, "reasoning_tokens": {rt}}}, "latency_s": 0.0, "cost_usd": {cost}, '
            f'"flags": [{", ".join(f"{chr(34)}{f}{chr(34)}" for f in flags)}], "logprobs": null, "error": null'
            f'{tail}{status}", "attempts_made": 1, "extra": {{}}, "queue_wait_s": null, "batch": true}}')
