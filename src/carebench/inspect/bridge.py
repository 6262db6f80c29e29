"""carebench's messages and requests as Inspect's, and Inspect's model output as carebench's ``Completion``.

A suite's prompt becomes the sample's input unchanged, and its answer is read with the
suite's own rules.

The stop reason maps onto carebench's finish reasons (``max_tokens`` and
``model_length`` are a length stop, ``content_filter`` a filtered answer) and the
flags come from :func:`carebench.types.flags_for`, the rule every provider shares, so
an empty, cut or filtered answer gets the status a carebench run would give it.
"""

from __future__ import annotations

from typing import Any

from carebench.types import ChatRequest, Completion, Message, Usage, flags_for

#: Inspect's stop reasons -> the finish reasons carebench's providers report
FINISH_REASONS = {"stop": "stop", "max_tokens": "length", "model_length": "length",
                  "content_filter": "content_filter", "tool_calls": "tool_calls", "unknown": None}


def completion_of(output: Any, model: str = "") -> Completion:
    """``output``: an ``inspect_ai.model.ModelOutput``."""
    text = output.completion or ""
    finish = FINISH_REASONS.get(str(output.stop_reason)) if output.choices else None
    usage = Usage()
    if output.usage is not None:
        usage = Usage(prompt_tokens=int(output.usage.input_tokens or 0),
                      completion_tokens=int(output.usage.output_tokens or 0),
                      reasoning_tokens=int(output.usage.reasoning_tokens or 0))
    return Completion(text=text, finish_reason=finish, usage=usage, flags=flags_for(text, finish),
                      error=output.error, model=model, latency_s=float(output.time or 0.0),
                      priced=False, queue_wait_s=0.0)


def chat_messages(msgs: tuple[Message, ...] | list[Message]) -> list[Any]:
    """carebench messages as Inspect chat messages (same roles, same text)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[m.role](content=m.content) for m in msgs]


def generate_options(req: ChatRequest) -> dict[str, Any]:
    """The decoding settings of a carebench request as ``GenerateConfig`` arguments."""
    opts: dict[str, Any] = {"temperature": req.temperature}
    if req.max_tokens is not None:
        opts["max_tokens"] = req.max_tokens
    if req.top_p is not None:
        opts["top_p"] = req.top_p
    if req.seed is not None:
        opts["seed"] = req.seed
    if req.stop:
        opts["stop_seqs"] = list(req.stop)
    return opts
