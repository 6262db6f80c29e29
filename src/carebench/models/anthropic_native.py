"""Native Anthropic Messages API client (``anthropic:MODEL[@BASE_URL]``).

No structured-output mechanism is assumed here: structured requests carry their
instruction in the prompt and are parsed tolerantly by ``carebench.models.structured``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from carebench.models.base import ModelSpec, TransientError
from carebench.models.http import LoopLocalClient, post_json
from carebench.models.options import RequestOptions
from carebench.models.pricing import cost_fields
from carebench.types import CarebenchError, ChatRequest, Completion, Usage, flags_for

ANTHROPIC_URL = "https://api.anthropic.com/v1"
#: the Messages API version of every Anthropic call, live and batch (the ``anthropic-version``
#: header; batch manifests record it per file). Its request takes ``temperature``, ``top_p``
#: and ``stop_sequences`` as :func:`messages_body` writes them; the SDK's own default is
#: newer (2026-10-21 in anthropic 2.16) and has no sampling parameters at all.
ANTHROPIC_VERSION = "2023-06-01"
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "refusal": "content_filter"}


class AnthropicModel:
    default_concurrency = 8

    def __init__(self, spec: ModelSpec, timeout_s: float = 120.0, concurrency: int | None = None,
                 require_key: bool = True):
        self.spec = spec
        key = os.environ.get("ANTHROPIC_API_KEY")
        if not key and spec.base_url is None and require_key:
            raise CarebenchError(f"ANTHROPIC_API_KEY is not set (needed for {spec})")
        self._headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if key:
            self._headers["x-api-key"] = key
        self._url = f"{spec.base_url or ANTHROPIC_URL}/messages"
        self._http = LoopLocalClient(concurrency or 32, timeout_s)
        self.request_options = RequestOptions()  # per-model overrides (e.g. extended thinking)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _payload(self, req: ChatRequest) -> dict[str, Any]:
        return messages_body(self.spec.model, req, self.request_options)

    async def complete(self, request: ChatRequest) -> Completion:
        t0 = time.perf_counter()
        data = await post_json(self._http.get(), self._url, self._payload(request), self._headers)
        return parse_messages(data, str(self.spec), time.perf_counter() - t0)


def messages_body(model: str, req: ChatRequest, options: RequestOptions | None = None) -> dict[str, Any]:
    """The Messages API body for ``req``: what the live client POSTs and a Message Batches
    request's ``params`` (one function, so the two cannot drift)."""
    system = "\n\n".join(m.content for m in req.messages if m.role == "system")
    p: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in req.messages if m.role != "system"],
        "max_tokens": req.max_tokens or 1024,
        "temperature": req.temperature,
    }
    if system:
        p["system"] = system
    if req.top_p is not None:
        p["top_p"] = req.top_p
    if req.stop:
        p["stop_sequences"] = list(req.stop)
    if options:
        p = options.apply_anthropic(p)
    return p


def parse_messages(data: dict[str, Any], name: str, latency: float) -> Completion:
    """The Completion for a Messages response body (live, or a batch result's ``message``)."""
    try:
        text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
    except (KeyError, TypeError, AttributeError):
        raise TransientError("response has no content blocks") from None
    finish = _STOP.get(data.get("stop_reason") or "", data.get("stop_reason"))
    u = data.get("usage") or {}
    usage = Usage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0))
    return Completion(
        text=text,
        finish_reason=finish,
        usage=usage,
        latency_s=latency,
        **cost_fields(name, usage),
        flags=flags_for(text, finish),
        model=name,
    )
