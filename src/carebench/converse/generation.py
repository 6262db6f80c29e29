"""Simulated conversations: a user simulator plays a persona against the chatbot under test.

For every simulator x chatbot x persona x repeat (x session), up to
:attr:`GenerationConfig.max_messages` messages are played: ``turns`` exchanges (a user
message, then the chatbot's reply), or ``turns`` single messages as VERA-MH's ``-t``
counts them, the chatbot always speaking last. Messages run in lockstep across all
conversations: one batch of simulator calls (stage ``simulator``) or of chatbot calls
(stage ``chatbot``) per message, each through :meth:`carebench.engine.run.Run.calls`, so
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
- When the chatbot speaks first, each conversation asks for its own greeting, as VERA-MH
  does (its runner builds a fresh chatbot client for every persona, run and session and
  asks it to open the conversation). The greeting request is the same text for every
  persona, so its attempt and seed are drawn from the conversation's id
  (:func:`greeting_attempt`): without that, every persona would get one shared, cached
  greeting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from carebench.converse.personas import OPENING, PROMPTS, Persona
from carebench.converse.simulator_checks import role_reversal
from carebench.engine.runner import Call
from carebench.templates import fill, package_template
from carebench.types import ChatRequest, Completion, Message

STOP_MARKER = "[END_CONVERSATION]"
#: the stop signal VERA-MH's persona prompts ask for; read as a stop marker too, so its
#: persona templates work unchanged (matched without regard to case, as VERA-MH does)
VERA_STOP = "<END OF CONVERSATION>"
DEFAULT_TURNS = 20
DEFAULT_TEMPERATURE = 0.7
DEFAULT_MAX_TOKENS = 1024
OK, HARNESS_FAILURE = "ok", "harness_failure"
#: what ``turns`` counts: exchanges (a user message and the reply) or single messages (VERA-MH's ``-t``)
TURN_UNITS = ("exchanges", "messages")
#: the system prompt the chatbot gets with ``default_system_prompt="assistant"`` and no prompt file
ASSISTANT_PROMPT = "You are a helpful assistant."


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
    #: "exchanges" (carebench) or "messages" (VERA-MH's ``-t``)
    turn_unit: str = "exchanges"
    #: the chatbot writes the first message (a greeting), the simulated user answers it
    provider_speaks_first: bool = False
    #: the simulator's view of the chatbot's latest message is prefixed with a short reminder
    #: of its role (``simulator_reminder.txt``), every turn
    persona_reminder: bool = False
    #: session labels played per persona and repeat (each its own conversation); none: one
    sessions: tuple[str, ...] = ()
    #: stop once the conversation's messages hold this many words, checked after a chatbot reply
    max_total_words: int | None = None

    @property
    def max_messages(self) -> int:
        """The most messages a conversation holds, the chatbot always speaking last. In
        ``messages`` units an odd count with the user first (even with the chatbot first) is
        raised by one, as VERA-MH does; ``exchanges`` count user message + reply pairs (after
        the chatbot's greeting when it speaks first)."""
        first = 1 if self.provider_speaks_first else 0
        if self.turn_unit == "messages":
            return self.turns + (1 if self.turns % 2 != first else 0)
        return 2 * self.turns + first


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
    ended_by: str | None = None  # "simulator" (stop marker) | "turns" | "words" (the word cap)
    error: str | None = None
    failed_turn: int | None = None
    cut: bool = False  # the budget stopped it
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    cost_usd: float = 0.0
    #: the session label ("s1-intake") when several sessions are played per persona
    session: str | None = None
    #: the request's attempt and seed offset: the repeat, or repeat x sessions + session index
    attempt: int = -1
    words: int = 0

    def __post_init__(self) -> None:
        if self.attempt < 0:
            self.attempt = self.repeat

    @property
    def id(self) -> str:
        cid = conversation_id(self.persona.id, str(self.simulator.spec), str(self.chatbot.spec), self.repeat)
        return f"{cid}|{self.session}" if self.session else cid

    @property
    def active(self) -> bool:
        return self.status == OK and self.ended_by is None and not self.cut

    def to_record(self) -> dict[str, Any]:
        rec = {"kind": "conversation", "id": self.id, "persona": self.persona.id,
               "persona_name": self.persona.name, "risk_level": self.persona.risk_level,
               "simulator": str(self.simulator.spec), "chatbot": str(self.chatbot.spec),
               "repeat": self.repeat, "status": self.status, "ended_by": self.ended_by,
               "error": self.error, "failed_turn": self.failed_turn, "turns": self.turns,
               "usage": self.usage, "cost_usd": round(self.cost_usd, 8)}
        rec["role_reversal"] = role_reversal(self.turns)
        if self.session:
            rec["session"] = self.session
        return rec


def conversation_id(persona: str, simulator: str, chatbot: str, repeat: int) -> str:
    return f"{persona}|{simulator}|{chatbot}|{repeat}"


def simulator_system(persona_prompt: str) -> str:
    return fill(package_template(PROMPTS, "simulator_system"),
                {"persona": persona_prompt, "stop_marker": STOP_MARKER}, "simulator_system")


def simulator_request(c: Conversation, cfg: GenerationConfig) -> ChatRequest:
    """The simulator's view: persona instructions, a starter (unless the chatbot spoke
    first), then the conversation with the roles swapped (the simulator writes the user's
    side); with ``persona_reminder`` the chatbot's latest message carries the reminder."""
    msgs = [Message("system", simulator_system(c.persona_prompt))]
    if not cfg.provider_speaks_first:
        msgs.append(Message("user", package_template(PROMPTS, "simulator_start")))
    for t in c.turns:
        msgs.append(Message("assistant" if t["role"] == "user" else "user", t["content"]))
    if cfg.persona_reminder and c.turns and c.turns[-1]["role"] == "assistant":
        msgs[-1] = Message("user", package_template(PROMPTS, "simulator_reminder") + "\n\n" + msgs[-1].content)
    return ChatRequest(messages=tuple(msgs), temperature=cfg.simulator_temperature,
                       max_tokens=cfg.simulator_max_tokens, seed=cfg.seed + c.attempt, attempt=c.attempt)


def greeting_attempt(c: Conversation) -> int:
    """The greeting request's attempt (and seed offset): a stable number from the
    conversation's id, so each conversation's greeting is its own sample and cache entry."""
    return int(hashlib.sha256(c.id.encode("utf-8")).hexdigest()[:7], 16)


def chatbot_request(c: Conversation, cfg: GenerationConfig) -> ChatRequest:
    """The chatbot's view: its own system prompt (if any) and the conversation only (opened,
    when it speaks first, by a neutral starter asking it to greet the user)."""
    msgs = [Message("system", cfg.system_prompt)] if cfg.system_prompt else []
    if cfg.provider_speaks_first:
        msgs.append(Message("user", package_template(PROMPTS, "chatbot_start")))
    msgs.extend(Message(t["role"], t["content"]) for t in c.turns)
    attempt = greeting_attempt(c) if cfg.provider_speaks_first and not c.turns else c.attempt
    return ChatRequest(messages=tuple(msgs), temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                       seed=cfg.seed + attempt, attempt=attempt)


def split_stop(text: str) -> tuple[str, bool]:
    """The message without the stop marker (carebench's, or VERA-MH's in any case), and
    whether a marker was there."""
    low = text.lower()
    cut = [i for i in (text.find(STOP_MARKER), low.find(VERA_STOP.lower())) if i >= 0]
    if cut:
        return text[:min(cut)].strip(), True
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


def _turn(mi: int, cfg: GenerationConfig) -> int:
    """The exchange a message belongs to (1-based; a greeting when the chatbot speaks first is
    turn 1, and the user's answer opens turn 2)."""
    return (mi + (1 if cfg.provider_speaks_first else 0)) // 2 + 1


def _is_user(mi: int, cfg: GenerationConfig) -> bool:
    return (mi % 2 == 0) != cfg.provider_speaks_first


def _add(c: Conversation, role: str, content: str, status: str, turn: int, **extra: Any) -> None:
    c.turns.append({"role": role, "content": content, "status": status, "turn": turn, **extra})
    c.words += len(content.split())


def generate(run: Any, convs: Sequence[Conversation], cfg: GenerationConfig) -> GenerationResult:
    """Play every conversation up to ``cfg.max_messages`` messages (see the module docstring)."""
    out = GenerationResult(list(convs))
    total = cfg.max_messages
    for mi in range(total):
        active = [c for c in convs if c.active]
        if not active:
            break
        ti = _turn(mi, cfg)
        if _is_user(mi, cfg):
            callers = []
            for c in active:  # a persona with its own opening message says it verbatim: no call
                if c.persona.fields.get(OPENING) and not any(t["role"] == "user" for t in c.turns):
                    _add(c, "user", c.persona.fields[OPENING], "ok", ti, scripted=True)
                else:
                    callers.append(c)
            comps = run.calls([Call(c.simulator, simulator_request(c, cfg),
                                    {"conversation": c.id, "turn": ti, "role": "simulator"}) for c in callers],
                              f"simulated users, message {mi + 1}/{total}",
                              stage="simulator").completions if callers else []
            for c, comp in zip(callers, comps, strict=True):
                if comp is None:
                    c.cut = True
                    out.calls_skipped += total - mi
                    continue
                _account(c, comp)
                if comp.status == "error":
                    _fail(c, ti, "simulator", comp)
                    continue
                text, stop = split_stop(comp.text)
                if text or not stop:
                    _add(c, "user", text, comp.status, ti)
                if stop:
                    c.ended_by = "simulator"
        else:
            res = run.calls([Call(c.chatbot, chatbot_request(c, cfg),
                                  {"conversation": c.id, "turn": ti, "role": "chatbot"}) for c in active],
                            f"chatbot replies, message {mi + 1}/{total}", stage="chatbot")
            for c, comp in zip(active, res.completions, strict=True):
                if comp is None:
                    c.cut = True
                    out.calls_skipped += total - mi
                    continue
                _account(c, comp)
                if comp.status == "error":
                    _fail(c, ti, "chatbot", comp)
                    continue
                _add(c, "assistant", comp.text, comp.status, ti)
                if cfg.max_total_words is not None and c.words >= cfg.max_total_words:
                    c.ended_by = "words"
        if run.stopped:
            out.stopped = run.stopped
    for c in convs:
        if c.active:
            c.ended_by = "turns"
    out.stopped = out.stopped or run.stopped
    return out


def planned_calls(convs: Sequence[Conversation], cfg: GenerationConfig) -> list[Call]:
    """An upper bound for a dry run: every message of every conversation, replies assumed to
    fill their output caps (about four characters a token), no word cap reached."""
    calls: list[Call] = []
    for c0 in convs:
        c = Conversation(c0.persona, c0.persona_prompt, c0.simulator, c0.chatbot, c0.repeat,
                         session=c0.session, attempt=c0.attempt)
        for mi in range(cfg.max_messages):
            ti = _turn(mi, cfg)
            if not _is_user(mi, cfg):
                calls.append(Call(c.chatbot, chatbot_request(c, cfg)))
                c.turns.append({"role": "assistant", "content": "x" * (4 * cfg.max_tokens), "turn": ti})
            elif c.persona.fields.get(OPENING) and not any(t["role"] == "user" for t in c.turns):
                c.turns.append({"role": "user", "content": c.persona.fields[OPENING], "turn": ti})
            else:
                calls.append(Call(c.simulator, simulator_request(c, cfg)))
                # tagged filler: unknown replies of different conversations are different requests
                c.turns.append({"role": "user", "content": f"{c.id} " + "x" * (4 * cfg.simulator_max_tokens),
                                "turn": ti})
    return calls
