"""OpenAI-compatible chat and moderation clients over aiohttp.

One lean client covers OpenAI, vLLM, Ollama, llama.cpp's server, LM Studio and hosted
gateways. It is ours rather than the SDK so the per-call CPU cost stays small (the
runner must sustain thousands of calls) and so structured-output capability can
degrade per server instead of failing: ``json_schema`` -> ``json_object`` (+ schema
and GBNF grammar, as llama.cpp's server wants) -> prompt-only. The mode is decided
once per run and per server by a capability probe, the first structured call, before
any other is sent (see ``OpenAIChatModel._probe`` and :class:`OutputDecision`), and
recorded in the manifest; it never changes mid-run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

from carebench.models.base import ModelSpec, TransientError
from carebench.models.http import HTTPClientError, HTTPServerError, LoopLocalClient, post_json
from carebench.models.options import OUTPUT_MODES, RequestOptions
from carebench.models.pricing import cost_fields
from carebench.models.strict_schema import strict_schema
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
STRUCTURED_MODES = OUTPUT_MODES
#: an error answer that names the output-format feature it cannot honour; only such an
#: answer to the probe steps the mode down (a bare 500 or 503 is a transient failure)
_FEATURE_REFUSAL = re.compile(
    r"response_format|json_schema|json[ _]schema|json_object|structured output|grammar|"
    r"\bschema\b", re.IGNORECASE)


def resolve_key(spec: ModelSpec, required: bool = True) -> str | None:
    """The API key for a spec: required for OpenAI itself (unless only planning: a
    dry run makes no call, so a user can price a run before setting a key), optional
    for other servers."""
    if spec.base_url is None and spec.provider != "vllm":  # vllm:MODEL alone: batch files only
        key = os.environ.get("OPENAI_API_KEY")
        if not key and required:
            raise CarebenchError(
                f"OPENAI_API_KEY is not set (needed for {spec}); for a local server use "
                f"{spec.provider}:{spec.model}@http://HOST:PORT/v1"
            )
        return key
    return os.environ.get("CAREBENCH_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def no_live_vllm(spec: ModelSpec) -> str:
    """Why ``vllm:MODEL`` without a URL cannot be called live."""
    return (f"{spec} has no server URL, so it can only write batch files (--batch DIR, for vllm "
            f"run-batch); to call a running vLLM server use {spec}@http://HOST:PORT/v1")


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


def chat_body(model: str, req: ChatRequest, mode: str,
              options: RequestOptions | None = None) -> dict[str, Any]:
    """The chat-completions body for ``req``: what the live client POSTs and what a batch
    request file carries (one function, so the two cannot drift). ``mode`` is the
    structured-output constraint (see ``STRUCTURED_MODES``); ``options`` the model's
    request options (reasoning effort, output caps, extra fields)."""
    p: dict[str, Any] = {
        "model": model,
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
        if mode == "json_schema":  # strict only in the form strict mode accepts (None: it has none)
            strict = strict_schema(schema)
            p["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": req.structured.name, "schema": schema if strict is None else strict,
                                "strict": strict is not None},
            }
        else:
            p["response_format"] = {"type": "json_object", "schema": schema}
            grammar = _gbnf(req.structured)
            if grammar:
                p["grammar"] = grammar
    if options:
        p = options.apply_openai(p, req.max_tokens)
    return p


def parse_chat(data: dict[str, Any], name: str, latency: float) -> Completion:
    """The Completion for a chat-completions response body (live, or a batch result's
    ``response.body``): one parser, so a batch answer equals the live one."""
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
    details = u.get("completion_tokens_details") or {}
    usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                  int(details.get("reasoning_tokens") or 0) if isinstance(details, dict) else 0)
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
    flags = flags_for(text, finish)
    # OpenAI's ``message.refusal``: the model declined (structured outputs say so there, not in
    # the content); the same outcome as a refusal finish reason, kept with its text
    refusal = msg.get("refusal")
    extra: dict[str, Any] = {}
    if isinstance(refusal, str) and refusal.strip():
        extra["refusal"] = refusal
        if "content_filtered" not in flags:
            flags = ("content_filtered", *flags)
    return Completion(
        text=text,
        finish_reason=finish,
        usage=usage,
        latency_s=latency,
        **cost_fields(name, usage),
        flags=flags,
        logprobs=logprobs,
        model=name,
        extra=extra,
    )


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


class OutputDecision:
    """The structured-output mode of one server, decided by one probe for every model on it.

    A self-hosted server (vLLM, llama.cpp's server, Ollama, LM Studio) applies the same
    output constraint whatever model name a request carries, so a run decides once per
    base URL (the run context hands every model of a server the same decision); a refused
    probe per model name only repeated the same refusal, and llama.cpp's server logs a
    traceback for each. None of these servers states its structured-output support in
    what it publishes (llama.cpp's ``/props`` and ``/v1/models``, vLLM's ``/v1/models``
    list the model, context size and build, not the accepted ``response_format`` types),
    so the probe is the reading. OpenAI's own API (no ``@URL``) keeps one decision per
    model: its models do differ."""

    def __init__(self) -> None:
        self.mode: str | None = None
        self.log: list[dict[str, Any]] = []  # what the probe tried and why it stepped down
        self.decided_by: str | None = None  # the model spec whose call was the probe
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def lock(self) -> asyncio.Lock:
        """The probe's lock, for the running loop (each batch of a run runs on its own)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop = asyncio.Lock(), loop
        return self._lock


class OpenAIChatModel(_OpenAIBase):
    """``openai:MODEL[@BASE_URL]``, and ``vllm:MODEL[@BASE_URL]`` (a vLLM server's
    OpenAI-compatible API: the same requests; without a URL only batch files, see
    docs/batch.md)."""

    def __init__(self, spec: ModelSpec, timeout_s: float = 120.0, concurrency: int | None = None,
                 require_key: bool = True):
        super().__init__(spec, timeout_s, concurrency, require_key)
        #: the server's output mode, shared with every model of the same server by the run
        #: context (``Run.model``); this model's own until then
        self.output_decision = OutputDecision()
        self._option_mode: str | None = None  # fixed by the ``output`` model option
        self.asked_structured = False  # sent a structured request (its mode goes in the manifest)
        self.request_options = RequestOptions()  # per-model overrides (reasoning models ...)
        self._url = f"{self.base_url}/chat/completions"
        self._name = str(spec)

    def _payload(self, req: ChatRequest, mode: str) -> dict[str, Any]:
        return chat_body(self.spec.model, req, mode, self.request_options)

    @property
    def structured_mode(self) -> str | None:
        """Output constraint for structured requests: the ``output`` model option, else
        the server's decision (None = not decided yet)."""
        return self._option_mode or self.output_decision.mode

    @property
    def probe_log(self) -> list[dict[str, Any]]:
        """How the mode was decided, as the manifest records it."""
        if self._option_mode is not None:
            return [{"decided": self._option_mode, "by": "model option output"}]
        d = self.output_decision
        if d.decided_by is not None and d.decided_by != self._name:
            return [{"decided": d.mode, "by": f"the probe of {d.decided_by} on the same server"}]
        return list(d.log)

    async def complete(self, request: ChatRequest) -> Completion:
        if self.spec.provider == "vllm" and self.spec.base_url is None:
            raise CarebenchError(no_live_vllm(self.spec))
        if request.structured is not None:
            self.asked_structured = True
        if request.structured is not None and self.structured_mode is None:
            if self.request_options.output is not None:  # the user's choice: nothing to probe
                self._option_mode = self.request_options.output
            else:
                return await self._probe(request)
        mode = self.structured_mode if request.structured is not None else "none"
        t0 = time.perf_counter()
        data = await post_json(self.client, self._url, self._payload(request, mode), self._headers)
        return self._parse(data, time.perf_counter() - t0)

    async def _probe(self, request: ChatRequest) -> Completion:
        """Decide the output constraint once per run and server; the first structured request is the probe.

        Structured requests wait until the probe has decided. It is sent with
        ``json_schema``; a server that refuses and *names* the feature (400/422/500/501
        mentioning response_format, JSON schema, grammar ...) gets the same request with
        ``json_object`` (+ grammar), then with no constraint. Any other failure (a
        transient 5xx, a timeout, a bad key) decides nothing and is raised, so the call
        fails or is retried as usual. The decided mode then holds for the whole run.
        """
        d = self.output_decision
        async with d.lock():
            if d.mode is None:
                return await self._probe_locked(request, d)
        # decided while this call waited (by this model or another on the server): sent
        # outside the lock, so the calls that queued behind the probe run concurrently
        return await self.complete(request)

    async def _probe_locked(self, request: ChatRequest, d: OutputDecision) -> Completion:
        t0 = time.perf_counter()
        for mode in STRUCTURED_MODES:
            try:
                data = await post_json(self.client, self._url, self._payload(request, mode),
                                       self._headers)
            except (HTTPServerError, HTTPClientError) as e:
                if (mode != "none" and e.status in (400, 422, 500, 501)
                        and _FEATURE_REFUSAL.search(str(e))):
                    d.log.append({"mode": mode, "refused": str(e)[:300]})
                    continue
                raise
            d.mode, d.decided_by = mode, self._name
            d.log.append({"decided": mode})
            return self._parse(data, time.perf_counter() - t0)
        raise AssertionError("unreachable: the unconstrained mode raises or returns")

    def _parse(self, data: dict[str, Any], latency: float) -> Completion:
        return parse_chat(data, self._name, latency)


#: our score name -> the category names a moderation response may use for it
MODERATION_CATEGORIES = {
    "self_harm": ("self-harm", "self_harm"),
    "self_harm_intent": ("self-harm/intent", "self_harm_intent"),
    "self_harm_instructions": ("self-harm/instructions", "self_harm_instructions"),
}


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
            if not isinstance(raw, dict):
                raise TypeError
        except (KeyError, IndexError, TypeError, ValueError):
            raise TransientError("moderation response has no results[0].category_scores") from None
        scores: dict[str, float] = {}
        for key, names in MODERATION_CATEGORIES.items():
            value = next((raw[n] for n in names if raw.get(n) is not None), None)
            try:
                scores[key] = float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                # a missing score is not a score of 0: this item has no moderation evidence
                return Completion(
                    text=json.dumps(raw), finish_reason="stop", latency_s=latency,
                    model=str(self.spec),
                    error=f"moderation response has no usable {names[0]!r} score ({value!r})",
                )
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
        payload = embedding_body(self.spec.model, [t for t, _ in batch], dims)
        t0 = time.perf_counter()
        try:
            data = await post_json(self.client, self._url, payload, self._headers)
            comps = parse_embeddings(data, len(batch), str(self.spec), 0.0)
        except BaseException as e:  # noqa: BLE001 - handed to every waiting call
            exc = e
        else:
            latency = time.perf_counter() - t0
            for (_, fut), comp in zip(batch, comps, strict=True):
                if not fut.done():
                    comp.latency_s = latency
                    fut.set_result(comp)
            return
        for _, fut in batch:
            if not fut.done():
                fut.set_exception(exc)


def embedding_body(model: str, texts: list[str], dims: int | None) -> dict[str, Any]:
    """The ``/v1/embeddings`` body (live, and in a batch request file: one text per line)."""
    payload: dict[str, Any] = {"model": model, "input": texts, "encoding_format": "float"}
    if dims is not None:
        payload["dimensions"] = dims
    return payload


def parse_embeddings(data: dict[str, Any], n: int, name: str, latency: float) -> list[Completion]:
    """One Completion per input of an embeddings response body (the vector in
    ``extra["embedding"]``, the token usage shared evenly); TransientError if malformed."""
    try:
        items = sorted(data["data"], key=lambda d: d.get("index", 0))
        vectors = [[float(x) for x in d["embedding"]] for d in items]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise TransientError(f"malformed embeddings response ({e})") from None
    if len(vectors) != n:
        raise TransientError(f"embeddings response has {len(vectors)} vectors for {n} inputs")
    tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
    share = [tokens // n + (i < tokens % n) for i in range(n)]
    out = []
    for vec, k in zip(vectors, share, strict=True):
        usage = Usage(prompt_tokens=k, completion_tokens=0)
        out.append(Completion(text=f"embedding[{len(vec)}]", finish_reason="stop", latency_s=latency,
                              model=name, usage=usage, **cost_fields(name, usage),
                              extra={"embedding": vec}))
    return out


def _gbnf(structured: StructuredSpec) -> str | None:
    try:
        from carebench.models.grammar import json_grammar
    except ImportError:
        return None
    try:  # the grammar describes the JSON the response_format asks for, or a stricter subset of it
        if structured.kind == "json" and structured.grammar_schema_json:
            return json_grammar(structured.grammar_schema_json)
        return json_grammar(schema_for(structured))
    except (ValueError, TypeError, KeyError):  # a grammar is an optimisation; parsing stays tolerant
        return None
