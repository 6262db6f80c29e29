"""System responses under the two responder-archetype instructions (VEILED-SH, §5.3).

Each system answers each sampled prompt twice: once instructed as a peer
supporter, once as a clinician. The request carries the archetype instruction,
the application context's interaction contract and the persona background
(system message) and the user's text (user message). Defaults follow the paper:
one response, a 1,024-token visible-output cap, temperature 0.

A call that failed (harness failure) becomes a response record with status
``error``; it is never judged and never scored as the system's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from carebench.engine.runner import Call
from carebench.models.base import ChatModel
from carebench.plural.records import ResponseRecord
from carebench.templates import fill, prompt
from carebench.types import CarebenchError, ChatRequest, Completion, Message

ARCHETYPES: tuple[str, ...] = ("peer", "clinician")
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TEMPERATURE = 0.0


@cache
def _builtin_instruction(archetype: str) -> str:
    return prompt(f"plural_responder_{archetype}")


@dataclass(frozen=True)
class ResponseConfig:
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    reasoning_effort: str | None = None  # recorded; sent where the provider takes it
    instruction_files: Mapping[str, str] = field(default_factory=dict)  # archetype -> file

    def instruction(self, archetype: str) -> str:
        if archetype not in ARCHETYPES:
            raise CarebenchError(f"unknown archetype {archetype!r}; expected one of {', '.join(ARCHETYPES)}")
        path = self.instruction_files.get(archetype)
        if not path:
            return _builtin_instruction(archetype)
        try:
            text = Path(path).read_text("utf-8").strip()
        except OSError as e:
            raise CarebenchError(f"cannot read the {archetype} instruction {path}: {e.strerror}") from None
        if not text:
            raise CarebenchError(f"the {archetype} instruction file {path} is empty")
        return text


def system_message(instruction: str, contract: str, persona: str) -> str:
    """The responder's system message: role, setting and its contract, persona as background only."""
    parts = [instruction, fill(prompt("plural_responder_setting"), {"contract": contract},
                               "plural_responder_setting").strip()]
    if persona.strip():
        parts.append(fill(prompt("plural_responder_background"), {"persona": persona.strip()},
                          "plural_responder_background"))
    return "\n\n".join(parts)


def response_request(prompt: Any, archetype: str, contexts: Mapping[str, Any], cfg: ResponseConfig) -> ChatRequest:
    """The request one system receives for one prompt under one archetype."""
    ctx = contexts.get(prompt.context)
    if ctx is None:
        raise CarebenchError(f"prompt {prompt.id}: unknown context {prompt.context!r}; "
                             f"known: {', '.join(sorted(contexts))}")
    system = system_message(cfg.instruction(archetype), ctx.contract_text(), prompt.persona.text)
    return ChatRequest(
        messages=(Message("system", system), Message("user", prompt.text)),
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
    )


def response_calls(
    prompts: Sequence[Any], systems: Sequence[ChatModel], archetypes: Sequence[str],
    contexts: Mapping[str, Any], cfg: ResponseConfig,
) -> list[Call]:
    """One call per (system, archetype, prompt); tags say which."""
    return [
        Call(m, response_request(p, a, contexts, cfg), {"system": str(m.spec), "archetype": a, "prompt_id": p.id})
        for m in systems for a in archetypes for p in prompts
    ]


def response_records(calls: Sequence[Call], completions: Sequence[Completion | None]) -> list[ResponseRecord]:
    """Records of the calls that were made (a stopped run leaves the rest out)."""
    out = []
    for c, comp in zip(calls, completions, strict=True):
        if comp is None:
            continue
        t = c.tag
        out.append(ResponseRecord(
            system=t["system"], archetype=t["archetype"], prompt_id=t["prompt_id"],
            text=comp.text if comp.error is None else "",
            status=comp.status, usage={"prompt_tokens": comp.usage.prompt_tokens,
                                       "completion_tokens": comp.usage.completion_tokens},
            latency_s=round(comp.latency_s, 6), cost_usd=comp.cost_usd, error=comp.error,
        ))
    return out
