"""Simulated conversations: a user simulator plays a persona against the chatbot under test.

For every simulator x chatbot x persona x repeat, up to ``turns`` exchanges are played
(a user message, then the chatbot's reply). Turns run in lockstep across all
conversations: one batch of simulator calls (stage ``simulator``), then one batch of
chatbot calls (stage ``chatbot``), each through :meth:`carebench.run.Run.calls`, so
every turn is cached and budgeted. A killed run re-asks the same requests and gets
the completed turns back from the cache: it resumes mid-conversation without
repeating a completed turn.

- The chatbot sees only its own system prompt (if any) and the conversation.
- The simulator sees the persona prompt and the conversation from the user's side
  (its own messages as ``assistant``, the chatbot's as ``user``), opened by a short
  starter message. It ends the conversation by writing :data:`STOP_MARKER`; the text
  before the marker, if any, is kept as the user's closing message and the chatbot is
  not asked again.
- A call that fails after every retry (simulator or chatbot) makes the conversation a
  *harness failure*: it stops there, is never judged, and is counted and reported.
- A persona with an ``opening_message`` field (the seeds' cases: ``--personas-from``)
  opens with that text verbatim; the simulator writes the user's turns from the second on.
- The repeat index goes into ``ChatRequest.attempt`` and the sampling seed, so repeats
  are separate samples with separate cache entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from carebench.converse.personas import OPENING, PROMPTS, Persona
from carebench.runner import Call
from carebench.templates import fill, package_template
from carebench.types import ChatRequest, Completion, Message

STOP_MARKER = "[END_CONVERSATION]"
DEFAULT_TURNS = 20
DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_TOKENS = 1024
OK, HARNESS_FAILURE = "ok", "harness_failure"


@dataclass
class GenerationConfig:
    turns: int = DEFAULT_TURNS
    repeats: int = 1
    temperature: float = DEFAULT_TEMPERATURE
    simulator_temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    simulator_max_tokens: int = 512
    system_prompt: str | None = None
    seed: int = 12345


@dataclass
class Conversation:
    """One conversation in progress (and, finished, its record)."""

    persona: Persona
    persona_prompt: str
    simulator: Any  # ChatModel
    chatbot: Any
    repeat: int
    turns: list[dict[str, Any]] = field(default_factory=list)
    status: str = OK
    ended_by: str | None = None  # "simulator" (stop marker) | "turns"
    error: str | None = None
    failed_turn: int | None = None
    cut: bool = False  # the budget stopped it
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    cost_usd: float = 0.0

    @property
    def id(self) -> str:
        return conversation_id(self.persona.id, str(self.simulator.spec), str(self.chatbot.spec), self.repeat)

    @property
    def active(self) -> bool:
        return self.status == OK and self.ended_by is None and not self.cut

    def to_record(self) -> dict[str, Any]:
        return {"kind": "conversation", "id": self.id, "persona": self.persona.id,
                "persona_name": self.persona.name, "risk_level": self.persona.risk_level,
                "simulator": str(self.simulator.spec), "chatbot": str(self.chatbot.spec),
                "repeat": self.repeat, "status": self.status, "ended_by": self.ended_by,
                "error": self.error, "failed_turn": self.failed_turn, "turns": self.turns,
                "usage": self.usage, "cost_usd": round(self.cost_usd, 8)}


def conversation_id(persona: str, simulator: str, chatbot: str, repeat: int) -> str:
    return f"{persona}|{simulator}|{chatbot}|{repeat}"


def simulator_system(persona_prompt: str) -> str:
    return fill(package_template(PROMPTS, "simulator_system"),
                {"persona": persona_prompt, "stop_marker": STOP_MARKER}, "simulator_system")


def simulator_request(c: Conversation, cfg: GenerationConfig) -> ChatRequest:
    """The simulator's view: persona instructions, a starter, then the conversation with
    the roles swapped (the simulator writes the user's side)."""
    msgs = [Message("system", simulator_system(c.persona_prompt)),
            Message("user", package_template(PROMPTS, "simulator_start"))]
    for t in c.turns:
        msgs.append(Message("assistant" if t["role"] == "user" else "user", t["content"]))
    return ChatRequest(messages=tuple(msgs), temperature=cfg.simulator_temperature,
                       max_tokens=cfg.simulator_max_tokens, seed=cfg.seed + c.repeat, attempt=c.repeat)


def chatbot_request(c: Conversation, cfg: GenerationConfig) -> ChatRequest:
    """The chatbot's view: its own system prompt (if any) and the conversation only."""
    msgs = [Message("system", cfg.system_prompt)] if cfg.system_prompt else []
    msgs.extend(Message(t["role"], t["content"]) for t in c.turns)
    return ChatRequest(messages=tuple(msgs), temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                       seed=cfg.seed + c.repeat, attempt=c.repeat)


def split_stop(text: str) -> tuple[str, bool]:
    """The message without the stop marker, and whether the marker was there."""
    if STOP_MARKER in text:
        return text.split(STOP_MARKER, 1)[0].strip(), True
    return text.strip(), False


@dataclass
class GenerationResult:
    conversations: list[Conversation]
    stopped: str | None = None
    calls_skipped: int = 0


def _account(c: Conversation, comp: Completion) -> None:
    c.usage["prompt_tokens"] += comp.usage.prompt_tokens
    c.usage["completion_tokens"] += comp.usage.completion_tokens
    c.cost_usd += comp.cost_usd


def _fail(c: Conversation, turn: int, who: str, comp: Completion) -> None:
    c.status = HARNESS_FAILURE
    c.failed_turn = turn
    c.error = f"{who} call failed after every retry: {comp.error or 'error'}"


def generate(run: Any, convs: Sequence[Conversation], cfg: GenerationConfig) -> GenerationResult:
    """Play every conversation up to ``cfg.turns`` exchanges (see the module docstring)."""
    out = GenerationResult(list(convs))
    for ti in range(1, cfg.turns + 1):
        active = [c for c in convs if c.active]
        if not active:
            break
        if ti == 1:  # a persona with its own opening message says it verbatim: no simulator call
            for c in active:
                if c.persona.fields.get(OPENING):
                    c.turns.append({"role": "user", "content": c.persona.fields[OPENING], "status": "ok",
                                    "turn": 1, "scripted": True})
            opened = [c for c in active if c.turns]
            active = [c for c in active if not c.turns]
        else:
            opened = []
        comps = run.calls([Call(c.simulator, simulator_request(c, cfg),
                                {"conversation": c.id, "turn": ti, "role": "simulator"}) for c in active],
                          f"simulated users, turn {ti}/{cfg.turns}", stage="simulator").completions if active else []
        replying = list(opened)
        for c, comp in zip(active, comps, strict=True):
            if comp is None:
                c.cut = True
                out.calls_skipped += 2 * (cfg.turns - ti) + 1
                continue
            _account(c, comp)
            if comp.status == "error":
                _fail(c, ti, "simulator", comp)
                continue
            text, stop = split_stop(comp.text)
            if text or not stop:
                c.turns.append({"role": "user", "content": text, "status": comp.status, "turn": ti})
            if stop:
                c.ended_by = "simulator"
                continue
            replying.append(c)
        if replying:
            res = run.calls([Call(c.chatbot, chatbot_request(c, cfg),
                                  {"conversation": c.id, "turn": ti, "role": "chatbot"}) for c in replying],
                            f"chatbot replies, turn {ti}/{cfg.turns}", stage="chatbot")
            for c, comp in zip(replying, res.completions, strict=True):
                if comp is None:
                    c.cut = True
                    out.calls_skipped += 2 * (cfg.turns - ti)
                    continue
                _account(c, comp)
                if comp.status == "error":
                    _fail(c, ti, "chatbot", comp)
                    continue
                c.turns.append({"role": "assistant", "content": comp.text, "status": comp.status, "turn": ti})
        if run.stopped:
            out.stopped = run.stopped
    for c in convs:
        if c.active:
            c.ended_by = "turns"
    out.stopped = out.stopped or run.stopped
    return out


def planned_calls(convs: Sequence[Conversation], cfg: GenerationConfig) -> list[Call]:
    """An upper bound for a dry run: every turn of every conversation, replies assumed to
    fill their output caps (about four characters a token)."""
    calls: list[Call] = []
    for c0 in convs:
        c = Conversation(c0.persona, c0.persona_prompt, c0.simulator, c0.chatbot, c0.repeat)
        for ti in range(1, cfg.turns + 1):
            if ti == 1 and c.persona.fields.get(OPENING):
                c.turns.append({"role": "user", "content": c.persona.fields[OPENING]})
                calls.append(Call(c.chatbot, chatbot_request(c, cfg)))
                c.turns.append({"role": "assistant", "content": "x" * (4 * cfg.max_tokens), "turn": ti})
                continue
            calls.append(Call(c.simulator, simulator_request(c, cfg)))
            # tagged filler: unknown replies of different conversations are different requests
            c.turns.append({"role": "user", "content": f"{c.id} " + "x" * (4 * cfg.simulator_max_tokens)})
            calls.append(Call(c.chatbot, chatbot_request(c, cfg)))
            c.turns.append({"role": "assistant", "content": "x" * (4 * cfg.max_tokens), "turn": ti})
    return calls
