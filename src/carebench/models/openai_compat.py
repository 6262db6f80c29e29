"""OpenAI-compatible chat and moderation clients over aiohttp.

One lean client covers OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio and hosted
gateways. It is ours rather than the SDK so the per-call CPU cost stays small (the
runner must sustain thousands of calls) and so structured-output capability can
degrade per server instead of failing: ``json_schema`` -> ``json_object`` (+ schema
and GBNF grammar, as llama.cpp's server wants) -> prompt-only with tolerant parsing.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from carebench.models.base import ModelSpec, TransientError
from carebench.models.http import HTTPClientError, HTTPServerError, LoopLocalClient, post_json
from carebench.models.pricing import cost_usd
from carebench.types import (
    CarebenchError,
    ChatRequest,
    Completion,
    StructuredSpec,
    TokenLogprob,
    Usage,
    flags_for,
)

OPENAI_URL = "https://api.openai.com/v1"
STRUCTURED_MODES = ("json_schema", "json_object", "none")


def resolve_key(spec: ModelSpec, required: bool = True) -> str | None:
    """The API key for a spec: required for OpenAI itself (unless only planning: a
    dry run makes no call, so a user can price a run before setting a key), optional
    for other servers."""
    if spec.base_url is None:
        key = os.environ.get("OPENAI_API_KEY")
        if not key and required:
            raise CarebenchError(
                f"OPENAI_API_KEY is not set (needed for {spec}); for a local server use "
                f"{spec.provider}:{spec.model}@http://HOST:PORT/v1"
            )
        return key
    return os.environ.get("CAREBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def schema_for(structured: StructuredSpec) -> dict[str, Any]:
    """JSON schema for a structured request (a choice becomes ``{"answer": enum}``)."""
    if structured.kind == "choice":
        return {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": list(structured.labels)}},
            "required": ["answer"],
            "additionalProperties": False,
        }
    return json.loads(structured.schema_json or "{}")


class _OpenAIBase:
    default_concurrency = 16

    def __init__(self, spec: ModelSpec, timeout_s: float = 120.0, concurrency: int | None = None,
                 require_key: bool = True):
        self.spec = spec
        self.base_url = spec.base_url or OPENAI_URL
        key = resolve_key(spec, required=require_key)
        self._headers = {"content-type": "application/json"}
        if key:
            self._headers["authorization"] = f"Bearer {key}"
        self._http = LoopLocalClient(concurrency or 64, timeout_s)

    @property
    def client(self):
        return self._http.get()

    async def aclose(self) -> None:
        await self._http.aclose()


class OpenAIChatModel(_OpenAIBase):
    """``openai:MODEL[@BASE_URL]``."""

    def __init__(self, spec: ModelSpec, timeout_s: float = 120.0, concurrency: int | None = None,
                 require_key: bool = True):
        super().__init__(spec, timeout_s, concurrency, require_key)
        self.structured_mode = "json_schema"
        self._url = f"{self.base_url}/chat/completions"
        self._name = str(spec)

    def _payload(self, req: ChatRequest, mode: str) -> dict[str, Any]:
        p: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [{"role": m.role, "content": m.content} for m in req.messages],
            "temperature": req.temperature,
        }
        if req.max_tokens is not None:
            p["max_tokens"] = req.max_tokens
        if req.top_p is not None:
            p["top_p"] = req.top_p
        if req.seed is not None:
            p["seed"] = req.seed
        if req.stop:
            p["stop"] = list(req.stop)
        if req.logprobs:
            p["logprobs"] = True
            if req.top_logprobs:
                p["top_logprobs"] = req.top_logprobs
        if req.structured is not None and mode != "none":
            schema = schema_for(req.structured)
            if mode == "json_schema":
                p["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": req.structured.name, "schema": schema, "strict": True},
                }
            else:
                p["response_format"] = {"type": "json_object", "schema": schema}
                grammar = _gbnf(req.structured)
                if grammar:
                    p["grammar"] = grammar
        return p

    async def complete(self, request: ChatRequest) -> Completion:
        t0 = time.perf_counter()
        while True:
            mode = self.structured_mode if request.structured is not None else "none"
            try:
                data = await post_json(self.client, self._url, self._payload(request, mode), self._headers)
                break
            except (HTTPServerError, HTTPClientError) as e:
                # Capability fallback: a server that cannot honour this response_format
                # answers 400/422/500/501; step down once per mode, remembered per model.
                if mode != "none" and e.status in (400, 422, 500, 501):
                    self.structured_mode = STRUCTURED_MODES[STRUCTURED_MODES.index(mode) + 1]
                    continue
                raise
        latency = time.perf_counter() - t0
        return self._parse(data, latency)

    def _parse(self, data: dict[str, Any], latency: float) -> Completion:
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
            text = msg.get("content") or ""
            if not isinstance(text, str):
                raise TypeError
            finish = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise TransientError("response has no choices[0].message") from None
        u = data.get("usage") or {}
        usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        logprobs = None
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and lp.get("content"):
            logprobs = tuple(
                TokenLogprob(
                    t.get("token", ""),
                    float(t.get("logprob", 0.0)),
                    {a.get("token", ""): float(a.get("logprob", 0.0)) for a in t.get("top_logprobs") or []},
                )
                for t in lp["content"]
            )
        return Completion(
            text=text,
            finish_reason=finish,
            usage=usage,
            latency_s=latency,
            cost_usd=cost_usd(self._name, usage),
            flags=flags_for(text, finish),
            logprobs=logprobs,
            model=self._name,
        )


class OpenAIModerationModel(_OpenAIBase):
    """``openai-moderation:MODEL``: self-harm category scores for the last user message.

    The scores are returned in ``Completion.extra["scores"]`` with keys ``self_harm``,
    ``self_harm_intent`` and ``self_harm_instructions`` (and as JSON text).
    """

    default_concurrency = 8

    def __init__(self, spec: ModelSpec, timeout_s: float = 60.0, concurrency: int | None = None,
                 require_key: bool = True):
        super().__init__(spec, timeout_s, concurrency, require_key)
        self._url = f"{self.base_url}/moderations"

    async def complete(self, request: ChatRequest) -> Completion:
        text = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        t0 = time.perf_counter()
        data = await post_json(
            self.client, self._url, {"model": self.spec.model, "input": text}, self._headers
        )
        latency = time.perf_counter() - t0
        try:
            raw = data["results"][0]["category_scores"]
            scores = {
                "self_harm": float(raw.get("self-harm", raw.get("self_harm", 0.0))),
                "self_harm_intent": float(raw.get("self-harm/intent", raw.get("self_harm_intent", 0.0))),
                "self_harm_instructions": float(
                    raw.get("self-harm/instructions", raw.get("self_harm_instructions", 0.0))
                ),
            }
        except (KeyError, IndexError, TypeError, ValueError):
            raise TransientError("moderation response has no results[0].category_scores") from None
        return Completion(
            text=json.dumps(scores),
            finish_reason="stop",
            latency_s=latency,
            model=str(self.spec),
            extra={"scores": scores},
        )


class OpenAIEmbeddingModel(_OpenAIBase):
    """``openai-embed:MODEL[@BASE_URL]``: the OpenAI-compatible ``/v1/embeddings`` endpoint
    (OpenAI, vLLM, Ollama, llama.cpp server).

    The runner sees one call per text (so each text is cached, budgeted, retried and
    logged like a completion); requests waiting at the same moment are sent together,
    up to ``batch_size`` inputs per HTTP request. A request's ``max_tokens`` carries the
    requested ``dimensions`` (None: the model's own size). The vector is returned in
    ``Completion.extra["embedding"]``; the batch's token usage is shared evenly.
    """

    default_concurrency = 256

    def __init__(self, spec: ModelSpec, timeout_s: float = 120.0, concurrency: int | None = None,
                 batch_size: int = 64, linger_s: float = 0.002):
        super().__init__(spec, timeout_s, concurrency)
        self._url = f"{self.base_url}/embeddings"
        self.batch_size = max(1, int(batch_size))
        self.linger_s = linger_s
        self._pending: dict[int | None, list[tuple[str, asyncio.Future]]] = {}

    async def complete(self, request: ChatRequest) -> Completion:
        text = request.messages[-1].content if request.messages else ""
        dims = request.max_tokens
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        batch = self._pending.setdefault(dims, [])
        batch.append((text, fut))
        if len(batch) >= self.batch_size:
            self._flush(dims)
        elif len(batch) == 1:
            loop.call_later(self.linger_s, self._flush, dims)
        return await fut

    def _flush(self, dims: int | None) -> None:
        batch = self._pending.pop(dims, [])
        if batch:
            asyncio.get_running_loop().create_task(self._send(dims, batch))

    async def _send(self, dims: int | None, batch: list[tuple[str, asyncio.Future]]) -> None:
        payload: dict[str, Any] = {"model": self.spec.model, "input": [t for t, _ in batch],
                                   "encoding_format": "float"}
        if dims is not None:
            payload["dimensions"] = dims
        t0 = time.perf_counter()
        try:
            data = await post_json(self.client, self._url, payload, self._headers)
            items = sorted(data["data"], key=lambda d: d.get("index", 0))
            vectors = [[float(x) for x in d["embedding"]] for d in items]
            if len(vectors) != len(batch):
                raise TransientError(f"embeddings response has {len(vectors)} vectors for {len(batch)} inputs")
        except (KeyError, TypeError, ValueError) as e:
            exc: BaseException = TransientError(f"malformed embeddings response ({e})")
        except BaseException as e:  # noqa: BLE001 - handed to every waiting call
            exc = e
        else:
            latency = time.perf_counter() - t0
            tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
            share = [tokens // len(batch) + (i < tokens % len(batch)) for i in range(len(batch))]
            for (_, fut), vec, n in zip(batch, vectors, share, strict=True):
                if not fut.done():
                    usage = Usage(prompt_tokens=n, completion_tokens=0)
                    fut.set_result(Completion(
                        text=f"embedding[{len(vec)}]", finish_reason="stop", latency_s=latency,
                        model=str(self.spec), usage=usage, cost_usd=cost_usd(str(self.spec), usage),
                        extra={"embedding": vec}))
            return
        for _, fut in batch:
            if not fut.done():
                fut.set_exception(exc)


def _gbnf(structured: StructuredSpec) -> str | None:
    try:
        from carebench.models.grammar import json_grammar
    except ImportError:
        return None
    try:  # the grammar must describe the same JSON the response_format asks for
        return json_grammar(schema_for(structured))
    except (ValueError, TypeError, KeyError):  # a grammar is an optimisation; parsing stays tolerant
        return None
