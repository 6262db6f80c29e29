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
from typing import Any

from carebench.models.base import ModelSpec
from carebench.types import CarebenchError, ChatRequest, Completion

CHAT, EMBEDDINGS, MESSAGES = "/v1/chat/completions", "/v1/embeddings", "/v1/messages"
#: which result-line shape each request format comes back in
RESULT_SHAPE = {"openai": "openai", "vllm": "openai", "anthropic": "anthropic"}
ANTHROPIC_RESULTS = ("succeeded", "errored", "canceled", "expired")


def file_format(spec: ModelSpec, requested: str | None) -> str | None:
    """The request-file format for a model's calls, or None when its calls are made live
    (in-process and replayed models cost nothing; moderation is free and has no batch
    route here). ``vllm`` applies to self-hosted ``openai:MODEL@URL`` models; models on
    OpenAI itself stay in OpenAI's format."""
    p = spec.provider
    if p == "anthropic":
        return "anthropic"
    if p in ("openai", "openai-embed"):
        if requested == "anthropic":
            raise CarebenchError(f"--batch-format anthropic: {spec} is an OpenAI-compatible model "
                                 "(use openai or vllm)")
        return "vllm" if requested == "vllm" and spec.base_url else "openai"
    return None


def request_body(model: Any, request: ChatRequest) -> tuple[str, dict[str, Any]]:
    """(endpoint, body) of one call, exactly as the live client would send it."""
    return body_builder(model)(request)


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
