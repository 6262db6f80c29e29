"""Shared value types: the vocabulary every suite uses to talk to models and records.

Plain frozen dataclasses (cheap to build thousands per second in the runner) with
explicit ``to_dict``/``from_dict`` so they round-trip through the cache and
``records.jsonl`` without losing anything.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]

#: Outcome of one model call as recorded. ``ok`` is the only fully usable one;
#: the rest are first-class outcomes with counts in every report.
Status = Literal["ok", "empty", "content_filter", "truncated", "error"]

#: how the runner's error text for a call that failed every retry begins (a connection
#: failure, a timeout, HTTP 429/5xx, a malformed response): see :func:`is_harness_failure`
GAVE_UP = "gave up after"


def is_harness_failure(error: str | None) -> bool:
    """Whether a call's recorded ``error`` is a harness failure rather than the model's answer.

    Harness failures are the transient ones the runner retried until it gave up: the server
    was down or unreachable, timed out, or answered HTTP 429/5xx. Nothing was learnt about
    the model, so what the call fed is never scored; the run is incomplete and a re-run
    retries the call (failed calls are never cached). Any other error is a permanent answer
    to that request (HTTP 4xx such as a provider's content-policy rejection or a context
    overflow, a llama.cpp error, a replay miss): it is the same on every try and is the
    method's outcome, handled by the suite's failure policy like a refusal or a truncation."""
    return error is not None and error.startswith(GAVE_UP)


#: how providers word a prompt that does not fit the model's context window (OpenAI's
#: ``context_length_exceeded``, vLLM's and llama.cpp's servers, Anthropic's "prompt is too long")
_CONTEXT_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context (?:size|window|length) (?:has been |was )?"
    r"exceeded|exceeds? (?:the )?(?:model'?s? |available )?context|prompt is too long|too many tokens|"
    r"(?:request|prompt|input) (?:\(\d+ tokens\) )?(?:is |are )?(?:longer|larger) than the (?:model'?s? )?context",
    re.IGNORECASE)


def is_context_overflow(error: str | None) -> bool:
    """Whether a call's recorded ``error`` says its prompt exceeded the model's context.

    Such a call fails the same way on every try with the same inputs: a permanent failure of
    that request, not a harness failure. The runner keeps it in the cache like an answer
    (without text), so a re-run does not pay for it again; changing the inputs (a shorter
    prompt, another output cap, another model) makes a new request."""
    return error is not None and not is_harness_failure(error) and _CONTEXT_OVERFLOW.search(error) is not None


class CarebenchError(Exception):
    """An error a user can cause (bad file, bad spec, missing key, unreachable server).

    The CLI prints its message as one line and exits non-zero, without a traceback.
    """


class RunStopped(Exception):
    """The run's budget stopped it after the finished results were written.

    The CLI prints the message (spent, calls left, how to resume) and exits 3.
    """


class BatchPending(RunStopped):
    """Batch mode wrote the calls the run still needs to a batch directory (after the
    finished results were written). The CLI prints the one line (what waits, how to
    submit, how to resume) and exits 4."""


class BudgetReached(CarebenchError, RunStopped):
    """A budget stop inside a suite that writes what finished on its error path.

    A :class:`RunStopped`, so the CLI exits 3 like every budget stop; also a
    CarebenchError, so the plural and construct commands' ``except CarebenchError``
    paths still write the stopped manifest, calls and records before it propagates.
    """


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


def messages(*pairs: tuple[Role, str]) -> tuple[Message, ...]:
    """Build a message tuple from ``(role, content)`` pairs."""
    return tuple(Message(r, c) for r, c in pairs)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0  # includes reasoning tokens (billed as output)
    reasoning_tokens: int = 0  # hidden reasoning, when the provider reports it

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token with its log probability and the top alternatives there."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StructuredSpec:
    """Ask for a constrained answer: one of fixed labels, or JSON matching a schema.

    Providers use their own mechanism where they have one (OpenAI ``response_format``,
    llama.cpp grammars); otherwise the prompt alone carries the instruction and the
    answer is parsed tolerantly (see ``carebench.models.structured``).
    """

    kind: Literal["choice", "json"]
    labels: tuple[str, ...] = ()
    schema_json: str | None = None  # JSON text of the schema (hashable, cache-stable)
    name: str = "answer"
    #: a stricter schema for decoders that constrain by grammar (llama.cpp). It may use what
    #: API structured-output modes refuse (a root ``anyOf``, ``uniqueItems``, ``contains``):
    #: sent as ``schema_json`` to OpenAI's strict mode, such a schema made the capability
    #: probe drop the whole run to unconstrained JSON. ``None``: the grammar follows ``schema_json``.
    grammar_schema_json: str | None = None

    def payload(self) -> dict[str, Any]:
        """The cache-key form; a spec without a grammar schema keeps its earlier key."""
        d = asdict(self)
        if d["grammar_schema_json"] is None:
            del d["grammar_schema_json"]
        return d


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Everything that determines a completion; its fields (plus the model) form the cache key.

    ``attempt`` distinguishes N independent samples of the same prompt: N attempts
    are N cache entries.
    """

    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int | None = 512
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0
    structured: StructuredSpec | None = None
    attempt: int = 0

    def cache_payload(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "messages": [m.to_dict() for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": list(self.stop),
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "structured": self.structured.payload() if self.structured else None,
            "attempt": self.attempt,
        }
        return d


@dataclass(slots=True)
class Completion:
    """What one model call produced, or why it produced nothing usable.

    ``status`` is derived from the flags and error: a content-filtered, truncated or
    empty answer is recorded as such, never passed off as a complete answer.
    """

    text: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    #: service time: request sent to answer received (the provider's clock around its
    #: request; the runner's when the provider keeps none). What reports call latency.
    latency_s: float = 0.0
    cost_usd: float = 0.0
    priced: bool = True  # False: the model has no price (cost_usd 0 is then not a real $0)
    flags: tuple[str, ...] = ()  # subset of {"empty", "content_filtered", "truncated"}
    logprobs: tuple[TokenLogprob, ...] | None = None
    error: str | None = None  # set when the call failed after all retries
    model: str = ""  # the model spec string that produced it
    cached: bool = False
    attempts_made: int = 1  # transport tries, including retries
    extra: dict[str, Any] = field(default_factory=dict)  # provider-specific (e.g. moderation scores)
    #: answered through a provider's batch endpoint (``carebench batch``), at the batch price
    batch: bool = False
    #: time the call waited in this client before its answered try was sent: for a free
    #: slot under the concurrency limit, and through earlier failed tries and back-off.
    #: None until the runner measures it (a cache hit waited for nothing); a provider that
    #: reproduces a recorded run (``replay:``) gives the recorded wait, which is kept
    queue_wait_s: float | None = None

    @property
    def status(self) -> Status:
        return status_of(self.flags, self.error)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def harness_failure(self) -> bool:
        """Failed after every retry (see :func:`is_harness_failure`)."""
        return is_harness_failure(self.error)

    def to_dict(self) -> dict[str, Any]:
        d = self._fields_dict()
        if self.batch:  # only then, so every other record keeps its shape
            d["batch"] = True
        return d

    def _fields_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "finish_reason": self.finish_reason,
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "reasoning_tokens": self.usage.reasoning_tokens,
            },
            "latency_s": self.latency_s,
            "cost_usd": self.cost_usd if self.priced else None,
            "flags": list(self.flags),
            "logprobs": None
            if self.logprobs is None
            else [[t.token, t.logprob, t.top] for t in self.logprobs],
            "error": self.error,
            "model": self.model,
            "status": self.status,
            "attempts_made": self.attempts_made,
            "extra": self.extra,
            # this run's wait, not the answer's: not read back (a cached answer waited for nothing)
            "queue_wait_s": self.queue_wait_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Completion:
        lp = d.get("logprobs")
        return cls(
            text=d.get("text") or "",
            finish_reason=d.get("finish_reason"),
            usage=Usage(**(d.get("usage") or {})),
            latency_s=float(d.get("latency_s") or 0.0),
            cost_usd=float(d.get("cost_usd") or 0.0),
            priced="cost_usd" not in d or d["cost_usd"] is not None,
            flags=tuple(d.get("flags") or ()),
            logprobs=None if lp is None else tuple(TokenLogprob(t, p, dict(top)) for t, p, top in lp),
            error=d.get("error"),
            model=d.get("model") or "",
            attempts_made=int(d.get("attempts_made") or 1),
            extra=dict(d.get("extra") or {}),
            batch=bool(d.get("batch", False)),
        )


def status_of(flags: tuple[str, ...], error: str | None) -> Status:
    """A completion's status from its flags and error (see ``Completion``)."""
    if error is not None:
        return "error"
    if "content_filtered" in flags:
        return "content_filter"
    if "empty" in flags:
        return "empty"
    if "truncated" in flags:
        return "truncated"
    return "ok"


def flags_for(text: str, finish_reason: str | None) -> tuple[str, ...]:
    """Derive outcome flags from an answer's text and finish reason (all providers share this)."""
    flags: list[str] = []
    fr = (finish_reason or "").lower()
    if fr in {"content_filter", "content_filtered", "safety", "refusal"}:
        flags.append("content_filtered")
    if fr in {"length", "max_tokens"}:
        flags.append("truncated")
    if not text.strip():
        flags.append("empty")
    return tuple(flags)


def label_probabilities(
    logprobs: tuple[TokenLogprob, ...] | None, labels: tuple[str, ...]
) -> dict[str, float] | None:
    """Probability of each label letter at the first position where any label appears
    among the top alternatives, normalised over the labels. ``None`` if unavailable."""
    if not logprobs:
        return None
    wanted = {lab.lower(): lab for lab in labels}
    for tok in logprobs:
        cands = dict(tok.top)
        cands.setdefault(tok.token, tok.logprob)
        found: dict[str, float] = {}
        for t, lp in cands.items():
            key = t.strip().lower()
            if key in wanted:
                lab = wanted[key]
                found[lab] = found.get(lab, 0.0) + math.exp(lp)
        if found:
            total = sum(found.values())
            return {lab: found.get(lab, 0.0) / total for lab in labels}
    return None
