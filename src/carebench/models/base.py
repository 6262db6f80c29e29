"""The ChatModel protocol, model-spec parsing and the errors providers raise.

A model is named by one string everywhere (CLI, configs, reports); ``parse_spec``
turns it into a ``ModelSpec`` and ``carebench.models.get_model`` into a provider.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Protocol, runtime_checkable

from carebench.types import CarebenchError, ChatRequest, Completion

PROVIDERS = ("openai", "anthropic", "llamacpp", "replay", "openai-moderation", "openai-embed", "vllm")


class TransientError(Exception):
    """A failure worth retrying (429, 5xx, timeout, connection error)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Unreachable(TransientError):
    """The server could not be connected to at all (refused, DNS failure)."""


class PermanentError(Exception):
    """A failure retrying cannot fix (4xx other than 429, malformed request, replay miss).

    Recorded as the call's error outcome; it does not stop the run.
    """


@dataclass(frozen=True, slots=True)
class ModelSpec:
    provider: str
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        s = f"{self.provider}:{self.model}"
        return f"{s}@{self.base_url}" if self.base_url else s


#: a model as code takes it: the parsed spec, or its text (parsed by the taker, once)
SpecLike = ModelSpec | str


_SPEC_RE = re.compile(r"^(?P<provider>[a-z][a-z0-9-]*):(?P<rest>.+)$")


def parse_spec(spec: str) -> ModelSpec:
    """Parse ``provider:MODEL[@BASE_URL]``; raise ``CarebenchError`` with a clear message."""
    m = _SPEC_RE.match(spec.strip()) if isinstance(spec, str) else None
    if not m:
        raise CarebenchError(
            f"malformed model spec {spec!r}: expected PROVIDER:MODEL, e.g. openai:gpt-4o-mini, "
            f"openai:MODEL@http://localhost:8000/v1, vllm:MODEL@http://localhost:8000/v1, anthropic:MODEL, "
            f"llamacpp:builtin, replay:PATH"
        )
    provider, rest = m["provider"], m["rest"].strip()  # "openai: m" is "openai:m": one model, one cache key
    if provider not in PROVIDERS:
        raise CarebenchError(
            f"unknown model provider {provider!r} in {spec!r}; known: {', '.join(PROVIDERS)}"
        )
    base_url = None
    if provider in ("openai", "openai-moderation", "openai-embed", "anthropic", "vllm") and "@" in rest:
        rest, base_url = (part.strip() for part in rest.split("@", 1))
        if not re.match(r"^https?://", base_url):
            raise CarebenchError(
                f"malformed base URL {base_url!r} in {spec!r}: expected http(s)://host[:port]/path"
            )
        base_url = base_url.rstrip("/")
    if not rest:
        raise CarebenchError(f"malformed model spec {spec!r}: empty model name")
    return ModelSpec(provider, rest, base_url)


def spec_texts(value: Any) -> Any:
    """``dataclasses.asdict`` with every ``ModelSpec``, at any depth, as its text: a config as
    its manifest records it (a spec is a dataclass too, which ``asdict`` would spell out)."""
    if isinstance(value, ModelSpec):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: spec_texts(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (list, tuple)):
        return type(value)(spec_texts(v) for v in value)
    if isinstance(value, dict):
        return type(value)((spec_texts(k), spec_texts(v)) for k, v in value.items())
    return copy.deepcopy(value)


def parse_specs(texts: list[str] | None) -> list[ModelSpec]:
    """A repeatable model flag's values, each parsed (None: the flag was not given)."""
    return [parse_spec(t) for t in texts or []]


@runtime_checkable
class ChatModel(Protocol):
    """What the runner needs of a provider.

    ``complete`` returns a ``Completion`` (with latency, usage, cost and flags filled)
    or raises ``TransientError`` / ``PermanentError``; it never retries by itself.
    """

    spec: ModelSpec
    #: default concurrency for this provider (the runner's limit overrides it)
    default_concurrency: int

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass(slots=True)
class Call:
    """One model call to make; ``tag`` is the caller's handle (e.g. item id and method).
    Made by suites and embedders, run by :mod:`carebench.engine.runner` (which re-exports it)."""

    model: ChatModel
    request: ChatRequest
    tag: Any = None
