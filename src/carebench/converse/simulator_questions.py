"""Optional judge questions on the simulated user (``--simulator-questions``).

The deterministic role-reversal check (:mod:`carebench.converse.simulator_checks`) looks
for phrases; a judge model can read the whole conversation instead. Two questions, each
opt-in, asked once per finished conversation of one judge model (``--simulator-judge``,
default the first ``--judge``):

- ``role-reversal``: did the simulated user at any point write as the assistant or helper?
- ``risk-consistency``: did the user's messages stay consistent with the persona's stated
  risk level? Not asked of a conversation whose risk level is unknown (a transcript
  without one): recorded as ``not_applicable``, left out of the share.

Every call goes through ``Run.calls`` (stage ``simulator questions``: cached, budgeted,
priced by ``--dry-run``); the prompts are package templates. An answer is strict JSON
whose ``answer`` is ``Yes`` or ``No``: anything else is a failure (``parse_error``; a
call that failed after every retry, ``error``), counted and never a verdict. One record
per conversation, ``kind: simulator_questions``, holds the answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from carebench.converse.judging import REPLY, answer_model, speaking_order, transcript_text
from carebench.converse.personas import PROMPTS
from carebench.judging import Judge, JudgeQuestion, ask, judge_calls
from carebench.templates import fill, package_template
from carebench.types import CarebenchError, Message

#: the question names ``--simulator-questions`` takes, and their prompt templates
QUESTIONS = {"role-reversal": "simulator_role_reversal", "risk-consistency": "simulator_risk_consistency"}
STAGE = "simulator questions"
KIND = "simulator_questions"
LABELS = ("Yes", "No")
#: a record's answer status when the question does not apply (risk level unknown)
NOT_APPLICABLE = "not_applicable"
MAX_TOKENS = 300


def parse_names(text: str | None) -> list[str]:
    """``role-reversal,risk-consistency`` -> the names, checked (an unknown one is an error)."""
    if text is None:
        return []
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = next((n for n in names if n not in QUESTIONS), None)
    if bad is not None or not names:
        raise CarebenchError(f"--simulator-questions: unknown question {bad or text!r} "
                             f"(give one or more of {', '.join(QUESTIONS)}, comma-separated)")
    return list(dict.fromkeys(names))


def applies(name: str, conversation: Mapping[str, Any]) -> bool:
    return name != "risk-consistency" or str(conversation.get("risk_level") or "unknown").lower() != "unknown"


def question(name: str, conversation: Mapping[str, Any]) -> JudgeQuestion:
    """One question about one conversation, keyed (conversation id, question name)."""
    values = {"transcript": transcript_text(conversation["turns"]), "reply": REPLY[True],
              "order": speaking_order(conversation["turns"])}
    if name == "risk-consistency":
        values["persona"] = str(conversation.get("persona_name") or conversation.get("persona"))
        values["risk_level"] = str(conversation.get("risk_level"))
    user = fill(package_template(PROMPTS, QUESTIONS[name]), values, QUESTIONS[name])
    system = package_template(PROMPTS, "simulator_judge_system")
    return JudgeQuestion((conversation["id"], name), (Message("system", system), Message("user", user)),
                         answer_model(LABELS))


def questions(conversations: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[JudgeQuestion]:
    return [question(n, c) for c in conversations for n in names if applies(n, c)]


def planned_calls(conversations: Sequence[Mapping[str, Any]], names: Sequence[str], judge: Judge) -> list[Any]:
    return judge_calls(questions(conversations, names), [judge], max_tokens=MAX_TOKENS)


@dataclass
class Result:
    records: list[dict[str, Any]]
    stopped: str | None = None
    failed_calls: int = 0


def ask_simulator_questions(run: Any, conversations: Sequence[Mapping[str, Any]], names: Sequence[str],
                            judge: Judge) -> Result:
    """Ask every question of every conversation (one batch), one record per conversation;
    a conversation some of whose calls the budget stopped is left without a record."""
    qs = questions(conversations, names)
    answers, res = ask(qs, [judge], run, stage=STAGE, description="questions on the simulated user",
                       max_tokens=MAX_TOKENS)
    got = {a.key: a for a in answers}
    out = Result([], res.stopped)
    for c in conversations:
        mine = {n: got.get((c["id"], n)) for n in names}
        if any(a is not None and a.completion is None for a in mine.values()):
            continue  # not asked: the run stopped
        block = {}
        for n, a in mine.items():
            if a is None:
                block[n] = {"status": NOT_APPLICABLE, "answer": None, "reason": "", "error": None}
            elif a.status == "ok":
                block[n] = {"status": "ok", "answer": a.value.answer,  # type: ignore[union-attr]
                            "reason": str(getattr(a.value, "reason", "")), "error": None}
            else:
                out.failed_calls += a.status == "error"
                block[n] = {"status": a.status, "answer": None, "reason": "", "error": a.error}
        out.records.append({"kind": KIND, "conversation_id": c["id"], "persona": c.get("persona"),
                            "risk_level": c.get("risk_level", "unknown"), "simulator": c.get("simulator"),
                            "chatbot": c.get("chatbot"), "judge": judge.label, "questions": block})
    return out
