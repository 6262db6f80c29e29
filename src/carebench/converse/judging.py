"""Judging a transcript by walking the rubric: one call per question, per judge.

Every (transcript, judge) pair is one walk (:class:`carebench.converse.walker.WalkState`).
Walks advance in rounds: each round asks every unfinished walk its pending question in
one batch through :meth:`carebench.run.Run.calls` (stage ``judging``), so the calls are
cached, budgeted and concurrent. A question's request carries the transcript, the
question, its examples and its options, and asks for JSON whose ``answer`` is
constrained to the options (a JSON schema with an enum: providers that support
structured output enforce it, and the answer is validated strictly either way).

An answer that does not parse, or names no option, is a *judge failure* for that
transcript: the walk stops, it is counted, and it never becomes a rating. A call that
failed after every retry is a judge failure too (recorded as ``error``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from carebench.converse.personas import PROMPTS
from carebench.converse.rubric import Question, Rubric
from carebench.converse.walker import WalkState
from carebench.judging import Judge, JudgeQuestion, judge_calls, read_answers
from carebench.templates import fill, package_template
from carebench.types import Message

JUDGE_MAX_TOKENS = 400
OK, JUDGE_FAILURE = "ok", "judge_failure"


@cache
def answer_model(labels: tuple[str, ...]) -> type[BaseModel]:
    """A pydantic model whose ``answer`` must be one of ``labels`` (an enum in its schema)."""
    return create_model("RubricAnswer", answer=(Literal[labels], ...),  # type: ignore[valid-type]
                        reason=(str, Field(default="")))


def transcript_text(turns: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for t in turns:
        who = "User" if t["role"] == "user" else "Chatbot"
        lines.append(f"{who}: {t['content']}")
    return "\n\n".join(lines)


@dataclass(frozen=True)
class Prompts:
    system: str
    question: str

    @classmethod
    def default(cls) -> Prompts:
        return cls(package_template(PROMPTS, "judge_system"), package_template(PROMPTS, "judge_question"))


def question_messages(q: Question, transcript: str, prompts: Prompts) -> tuple[Message, ...]:
    user = fill(prompts.question, {
        "transcript": transcript, "dimension": q.dimension, "question": q.text,
        "examples": q.examples or "(none)", "options": "\n".join(f"- {lab}" for lab in q.labels),
    }, "judge_question")
    return (Message("system", prompts.system), Message("user", user))


@dataclass
class _Walk:
    conversation: Mapping[str, Any]
    judge: Judge
    state: WalkState
    transcript: str
    status: str = OK
    error: str | None = None
    cut: bool = False


@dataclass
class JudgingResult:
    walks: list[dict[str, Any]]
    stopped: str | None = None


def judge_conversations(run: Any, rubric: Rubric, conversations: Sequence[Mapping[str, Any]],
                        judges: Sequence[Judge], *, prompts: Prompts | None = None,
                        temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS) -> JudgingResult:
    """Walk the rubric for every conversation with every judge (see the module docstring)."""
    prompts = prompts or Prompts.default()
    walks = [_Walk(c, j, WalkState(rubric), transcript_text(c["turns"]))
             for c in conversations for j in judges]
    rnd = 0
    while True:
        todo = [w for w in walks if not w.state.done and not w.cut]
        if not todo:
            break
        rnd += 1
        questions, seats = [], []
        for w in todo:
            q = w.state.pending()
            assert q is not None
            questions.append(JudgeQuestion((w.conversation["id"], w.judge.label, q.id),
                                           question_messages(q, w.transcript, prompts), answer_model(q.labels)))
            seats.append(w.judge)
        # one call per (walk, its question): questions and judges are paired, not crossed
        calls = [c for qq, j in zip(questions, seats, strict=True)
                 for c in judge_calls([qq], [j], temperature=temperature, max_tokens=max_tokens)]
        res = run.calls(calls, f"rubric questions, round {rnd}", stage="judging")
        for w, qq, j, comp in zip(todo, questions, seats, res.completions, strict=True):
            if comp is None:
                w.cut = True
                continue
            ans = read_answers([qq], [j], [comp])[0]
            if ans.status != "ok":
                w.status = JUDGE_FAILURE
                w.error = f"question {qq.key[2]}: {ans.status}: {ans.error}"
                w.state.fail(w.error)
                continue
            w.state.give(ans.value.answer, ans.value.reason)  # type: ignore[union-attr]
    return JudgingResult([walk_record(w) for w in walks if not w.cut], run.stopped)


def walk_record(w: _Walk) -> dict[str, Any]:
    c = w.conversation
    ok = w.status == OK
    return {"kind": "walk", "conversation_id": c["id"], "persona": c["persona"],
            "risk_level": c.get("risk_level", "unknown"), "simulator": c.get("simulator"),
            "chatbot": c["chatbot"], "repeat": c.get("repeat", 0), "judge": w.judge.label,
            "status": w.status, "error": w.error, "steps": [s.to_dict() for s in w.state.steps],
            "ratings": w.state.ratings() if ok else {}, "triggers": w.state.triggers() if ok else {}}


def planned_calls(rubric: Rubric, conversations: Sequence[Mapping[str, Any]], judges: Sequence[Judge],
                  *, prompts: Prompts | None = None, temperature: float = 0.0,
                  max_tokens: int = JUDGE_MAX_TOKENS) -> list[Any]:
    """An upper bound for a dry run: every non-auto question for every transcript and judge
    (a walk asks only the questions its answers lead to)."""
    prompts = prompts or Prompts.default()
    out = []
    for c in conversations:
        text = transcript_text(c["turns"])
        qs = [JudgeQuestion(q.id, question_messages(q, text, prompts), answer_model(q.labels))
              for q in rubric.questions if not q.auto_answer]
        out.extend(judge_calls(qs, judges, temperature=temperature, max_tokens=max_tokens))
    return out
