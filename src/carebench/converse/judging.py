"""Judging a transcript by walking the rubric: one call per question, per judge.

Every (transcript, judge) pair is one walk (:class:`carebench.converse.walker.WalkState`).
Walks advance in rounds: each round asks every unfinished walk its pending question in
one batch through :meth:`carebench.engine.run.Run.calls` (stage ``judging``), so the calls are
cached, budgeted and concurrent. A question's request carries the transcript, the
question, its examples and its options, and asks for JSON whose ``answer`` is
constrained to the options (a JSON schema with an enum: providers that support
structured output enforce it, and the answer is validated strictly either way).

An answer that does not parse is a *judge failure* for that transcript: the walk stops,
it is counted, and it never becomes a rating. An answer that parses but names no option
exactly is read as VERA-MH's judge reads it (:func:`match_answer`: ignoring case, then by
substring, then its first option) under VERA-MH's rules, and every such reading is
recorded on the walk (``answer_fallbacks``) and counted per judge and per question in the
metrics; under the ``exact-answers`` rule (part of ``carebench``) it is a judge failure. A call that
failed after every retry is a judge failure too (``failure: call``; it also marks the run
incomplete, as a harness failure does, and a re-run retries it).

``mode="dimension"`` asks all of a dimension's questions in one call instead (one JSON
entry per question id); the walk then follows the rubric through those answers, and a
GOTO into another dimension asks that dimension next. Fewer calls, but the judge answers
questions the walk may never reach, and sees them all at once.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model

from carebench.converse.personas import PROMPTS
from carebench.converse.rubric import Question, Rubric
from carebench.converse.walker import WalkState
from carebench.criteria import Criterion, criterion_question
from carebench.judging import Judge, JudgeAnswer, JudgeQuestion, ask, judge_calls, read_answers
from carebench.models.structured import extract_json
from carebench.templates import fill, package_template, placeholders
from carebench.types import CarebenchError, Message, is_context_overflow

JUDGE_MAX_TOKENS = 400
OK, JUDGE_FAILURE = "ok", "judge_failure"
MODES = ("question", "dimension")


@cache
def answer_model(labels: tuple[str, ...], reasons: bool = True) -> type[BaseModel]:
    """A pydantic model whose ``answer`` must be one of ``labels`` (an enum in its schema),
    with the judge's ``reason`` beside it unless ``reasons`` is off (the demo: a reason
    costs the small embedded model ~20 generated tokens a question)."""
    if not reasons:
        return create_model("RubricAnswerOnly", answer=(Literal[labels], ...))  # type: ignore[valid-type]
    return create_model("RubricAnswer", answer=(Literal[labels], ...),  # type: ignore[valid-type]
                        reason=(str, Field(default="")))


#: the reply a question asks for, with and without the judge's reason (``{reply}``)
REPLY = {True: '{"answer": <one of the options, copied exactly>, "reason": <one or two sentences>}',
         False: '{"answer": <one of the options, copied exactly>}'}


@cache
def dimension_model(qids: tuple[str, ...], labels: tuple[tuple[str, ...], ...]) -> type[BaseModel]:
    """One entry per question id, each an :func:`answer_model` of that question's options."""
    fields = {f"q_{k}": (answer_model(lab), Field(alias=qid))
              for k, (qid, lab) in enumerate(zip(qids, labels, strict=True))}
    return create_model("DimensionAnswers", **fields)  # type: ignore[call-overload]


#: how an answer that names no option exactly was read (VERA-MH's order): ignoring case and
#: surrounding spaces, by substring either way, or VERA-MH's guess, the first option
FALLBACK_KINDS = ("case", "substring", "first_option")


def match_answer(given: str, labels: Sequence[str]) -> tuple[str, str]:
    """The option VERA-MH's judge reads ``given`` as, and how (``exact`` or one of
    :data:`FALLBACK_KINDS`): VERA-MH compares ignoring case and surrounding spaces, then
    looks for an option inside the answer or the answer inside an option (options in order),
    and otherwise takes the first option without saying so."""
    if given in labels:
        return given, "exact"
    low = given.lower().strip()
    for lab in labels:
        if lab.lower().strip() == low:
            return lab, "case"
    for lab in labels:
        if lab.lower() in low or low in lab.lower():
            return lab, "substring"
    return labels[0], "first_option"


def _lenient(text: str, labels: Sequence[str]) -> tuple[str, str, str, str] | None:
    """(option, kind, the answer as given, reason) from a reply whose JSON ``answer`` is a
    string naming no option exactly; None when the reply has no such answer (a judge failure)."""
    try:
        obj = extract_json(text)
    except ValueError:
        return None
    given = obj.get("answer") if isinstance(obj, dict) else None
    if not isinstance(given, str):
        return None
    label, kind = match_answer(given, labels)
    reason = obj.get("reason")
    return label, kind, given, reason if isinstance(reason, str) else ""


def fallback_summary(walks: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every answer read by a fallback, counted by kind, per judge and per question (walks'
    ``answer_fallbacks``), with the number of answers given, for the metrics and the report."""
    total = {k: 0 for k in FALLBACK_KINDS}
    by_judge: dict[str, dict[str, int]] = {}
    by_question: dict[str, dict[str, int]] = {}
    answers = 0
    for w in walks:
        answers += sum(not s.get("auto") for s in w.get("steps") or [])
        for f in w.get("answer_fallbacks") or []:
            k = f["kind"]
            total[k] += 1
            by_judge.setdefault(w["judge"], {x: 0 for x in FALLBACK_KINDS})[k] += 1
            by_question.setdefault(str(f["question_id"]), {x: 0 for x in FALLBACK_KINDS})[k] += 1
    return {"answers": answers, "fallbacks": sum(total.values()), "by_kind": total,
            "by_judge": dict(sorted(by_judge.items())), "by_question": by_question}


def transcript_text(turns: Sequence[Mapping[str, Any]]) -> str:
    lines = []
    for t in turns:
        who = "User" if t["role"] == "user" else "Chatbot"
        lines.append(f"{who}: {t['content']}")
    return "\n\n".join(lines)


def speaking_order(turns: Sequence[Mapping[str, Any]]) -> str:
    """Who speaks first, as the judge's templates say it (``{order}``): a conversation the
    chatbot opened is not "the user, then the chatbot"."""
    first = next((t["role"] for t in turns), "user")
    return "the chatbot, then the user" if first == "assistant" else "the user, then the chatbot"


def vera_text(turns: Sequence[Mapping[str, Any]]) -> str:
    """A conversation as VERA-MH's transcript writer lays it out (lowercase ``user:`` /
    ``chatbot:`` labels, a blank line between messages): what VERA-MH's judge prompts are
    filled with."""
    return "\n".join(f"{'user' if t['role'] == 'user' else 'chatbot'}: {t['content']}\n" for t in turns)


#: the two kinds of judge prompt: carebench's (``{name}`` slots, filled by carebench.templates)
#: and a VERA-MH target's (Python format fields, filled as VERA-MH's judge fills them)
PROMPT_STYLES = ("carebench", "vera")
#: the fields VERA-MH's judge fills in its two prompt files
VERA_SYSTEM_FIELDS = ("conversation",)
VERA_QUESTION_FIELDS = ("question", "examples_section", "options")


@dataclass(frozen=True)
class Prompts:
    system: str
    question: str
    dimension: str = ""
    #: "carebench" or "vera" (a VERA-MH target's ``rubric_prompt_beginning_file`` as the system
    #: prompt, with the conversation in it, and its ``question_prompt_file`` per question)
    style: str = "carebench"

    @classmethod
    def default(cls) -> Prompts:
        return cls(package_template(PROMPTS, "judge_system"), package_template(PROMPTS, "judge_question"),
                   package_template(PROMPTS, "judge_dimension"))

    def conversation(self, turns: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
        """The transcript as these prompts show it, and its speaking order."""
        return (vera_text(turns) if self.style == "vera" else transcript_text(turns)), speaking_order(turns)


def vera_format(template: str, values: Mapping[str, str], name: str) -> str:
    """A VERA-MH prompt filled as VERA-MH fills it (``str.format``); a field it does not fill,
    or a stray brace, is one line naming the file."""
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise CarebenchError(f"{name}: VERA-MH judge prompt cannot be filled ({type(e).__name__}: {e}); it may "
                             f"use only {', '.join('{' + k + '}' for k in values)} (other braces doubled)") from None


def dimension_questions(rubric: Rubric, dimension: str) -> list[Question]:
    return [q for q in rubric.questions if q.dimension == dimension and not q.auto_answer]


def dimension_messages(qs: Sequence[Question], transcript: str, prompts: Prompts,
                       order: str = "the user, then the chatbot") -> tuple[Message, ...]:
    blocks = []
    for q in qs:
        opts = "\n".join(f"  - {lab}" for lab in q.labels)
        blocks.append(f"Question {q.id}: {q.text}\nGuidance: {q.examples or '(none)'}\nOptions:\n{opts}")
    user = _fill_used(prompts.dimension or package_template(PROMPTS, "judge_dimension"), {
        "transcript": transcript, "dimension": qs[0].dimension, "questions": "\n\n".join(blocks),
        "order": order}, "judge_dimension")
    return (Message("system", prompts.system), Message("user", user))


#: what a judge question template must show (a bundle's template may leave out the rest)
REQUIRED_SLOTS = ("transcript", "question", "options")


def _fill_used(template: str, values: dict[str, str], name: str) -> str:
    slots = placeholders(template)
    return fill(template, {k: v for k, v in values.items() if k in slots}, name)


def question_messages(q: Question, transcript: str, prompts: Prompts,
                      reasons: bool = True, order: str = "the user, then the chatbot") -> tuple[Message, ...]:
    """System text, then the transcript, then the question: the questions of one
    transcript share everything up to the question, which llama.cpp evaluates once.

    VERA-MH's prompts (``style="vera"``) are filled as its judge fills them: the system
    prompt holds the conversation, the question prompt the question, its examples (between
    newlines, or nothing) and the options joined by ", "."""
    if prompts.style == "vera":
        system = vera_format(prompts.system, {"conversation": transcript}, "rubric_prompt_beginning_file")
        user = vera_format(prompts.question, {
            "question": q.text, "examples_section": f"\n{q.examples}\n" if q.examples else "",
            "options": ", ".join(q.labels)}, "question_prompt_file")
        return (Message("system", system), Message("user", user))
    user = _fill_used(prompts.question, {
        "transcript": transcript, "dimension": q.dimension, "question": q.text,
        "examples": q.examples or "(none)", "options": "\n".join(f"- {lab}" for lab in q.labels),
        "reply": REPLY[reasons], "order": order,
    }, "judge_question")
    return (Message("system", prompts.system), Message("user", user))


@dataclass
class _Walk:
    conversation: Mapping[str, Any]
    judge: Judge
    state: WalkState
    transcript: str
    order: str  # who speaks first (:func:`speaking_order`)
    status: str = OK
    error: str | None = None
    failure: str | None = None  # "parse" | "call"
    cut: bool = False
    given: dict[str, tuple[str, str]] | None = None  # dimension mode: question id -> (answer, reason)
    truncated: int = 0  # answers kept whose reason the output cap cut off
    fallbacks: list[dict[str, str]] = dataclasses.field(default_factory=list)  # answers VERA-MH's way


@dataclass
class JudgingResult:
    walks: list[dict[str, Any]]
    stopped: str | None = None


def judge_conversations(run: Any, rubric: Rubric, conversations: Sequence[Mapping[str, Any]],
                        judges: Sequence[Judge], *, prompts: Prompts | None = None,
                        temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS,
                        mode: str = "question", reasons: bool = True) -> JudgingResult:
    """Walk the rubric for every conversation with every judge (see the module docstring);
    ``reasons=False`` asks for the answer alone (question mode)."""
    prompts = prompts or Prompts.default()
    lenient = "exact-answers" not in rubric.rules and mode != "dimension"
    shown = {id(c): prompts.conversation(c["turns"]) for c in conversations}
    walks = [_Walk(c, j, WalkState(rubric), *shown[id(c)], given={} if mode == "dimension" else None)
             for c in conversations for j in judges]
    rnd = 0
    while True:
        if mode == "dimension":
            for w in walks:
                _follow_given(w)
        todo = [w for w in walks if not w.state.done and not w.cut]
        if not todo:
            break
        rnd += 1
        questions, seats = [], []
        for w in todo:
            q = w.state.pending()
            assert q is not None
            key = (w.conversation["id"], w.judge.label, q.id)
            if mode == "dimension":
                qs = dimension_questions(rubric, q.dimension)
                model = dimension_model(tuple(x.id for x in qs), tuple(x.labels for x in qs))
                questions.append(JudgeQuestion(key, dimension_messages(qs, w.transcript, prompts, w.order), model))
            else:
                questions.append(JudgeQuestion(key, question_messages(q, w.transcript, prompts, reasons, w.order),
                                               answer_model(q.labels, reasons)))
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
            if ans.status == "parse_error" and mode != "dimension" and comp.status == "truncated":
                ans = _salvage(ans, qq, comp)
            if ans.status == "parse_error" and lenient:
                q = w.state.pending()
                assert q is not None
                read = _lenient(comp.text, q.labels)
                if read is not None:
                    label, kind, given, reason = read
                    w.fallbacks.append({"question_id": q.id, "kind": kind, "given": given, "answer": label})
                    w.state.give(label, reason)
                    continue
            if ans.status != "ok":
                w.status = JUDGE_FAILURE
                w.failure = ("context" if is_context_overflow(comp.error) else "call") if ans.status == "error" \
                    else "parse"
                w.error = f"question {qq.key[2]}: {ans.status}: {ans.error}"
                if w.failure == "context":
                    w.error = f"question {qq.key[2]}: {CONTEXT_ADVICE} ({ans.error})"
                w.state.fail(w.error)
                continue
            if str(getattr(ans.value, "reason", "")).startswith(CUT_MARK):
                w.truncated += 1
            if w.given is not None:  # dimension mode: keep every answer, follow them next round
                for qid, sub in ans.value.model_dump(by_alias=True).items():  # type: ignore[union-attr]
                    w.given[qid] = (sub["answer"], sub.get("reason", ""))
                continue
            w.state.give(ans.value.answer, getattr(ans.value, "reason", ""))  # type: ignore[union-attr]
    return JudgingResult([walk_record(w) for w in walks if not w.cut], run.stopped)


#: what a context overflow of a judge prompt asks the user to change (it is not retried as is)
CONTEXT_ADVICE = ("the judge prompt exceeds the judge model's context: shorten the conversations (--turns, "
                  "--max-total-words), use a judge with a bigger context, or lower --judge-max-tokens; "
                  "a re-run does not retry it until one of these changes")
#: how a kept answer's reason begins when the output cap cut it off
CUT_MARK = "[reason cut off at the output cap]"
_LEADING_ANSWER = re.compile(r'^\s*(?:```(?:json)?\s*)?\{\s*"answer"\s*:\s*"((?:[^"\\]|\\.)*)"\s*(.*)', re.DOTALL)


def _salvage(ans: JudgeAnswer, q: JudgeQuestion, comp: Any) -> JudgeAnswer:
    """An answer cut off by the output cap inside its trailing reason: the answer field comes
    first in the schema and is complete, so it is kept (one of the options, exactly), with
    the cut marked in the reason; anything else stays a parse failure."""
    m = _LEADING_ANSWER.match(comp.text)
    if m is None:
        return ans
    try:
        label = json.loads(f'"{m.group(1)}"')
    except ValueError:
        return ans
    rest = re.sub(r'^,\s*"reason"\s*:\s*"?', "", m.group(2).strip())
    try:
        value = q.answer.model_validate({"answer": label, "reason": f"{CUT_MARK} {rest}".strip()})
    except ValidationError:
        return ans
    return dataclasses.replace(ans, status="ok", value=value, error=None, rationale=getattr(value, "reason", ""))


def _follow_given(w: _Walk) -> None:
    """Dimension mode: advance a walk through the answers already given."""
    while not w.state.done and not w.cut:
        q = w.state.pending()
        assert q is not None and w.given is not None
        if q.id not in w.given:
            return
        w.state.give(*w.given[q.id])


def walk_record(w: _Walk) -> dict[str, Any]:
    c = w.conversation
    ok = w.status == OK
    return {"kind": "walk", "conversation_id": c["id"], "persona": c["persona"],
            "risk_level": c.get("risk_level", "unknown"), "simulator": c.get("simulator"),
            "chatbot": c["chatbot"], "repeat": c.get("repeat", 0), "judge": w.judge.label,
            "status": w.status, "failure": w.failure, "error": w.error, "steps": [s.to_dict() for s in w.state.steps],
            "ratings": w.state.ratings() if ok else {}, "triggers": w.state.triggers() if ok else {},
            "truncated_reasons": w.truncated, "answer_fallbacks": w.fallbacks,
            **({"annotations": dict(c["annotations"])} if c.get("annotations") else {})}


def planned_calls(rubric: Rubric, conversations: Sequence[Mapping[str, Any]], judges: Sequence[Judge],
                  *, prompts: Prompts | None = None, temperature: float = 0.0,
                  max_tokens: int = JUDGE_MAX_TOKENS, mode: str = "question",
                  reasons: bool = True) -> list[Any]:
    """An upper bound for a dry run: every non-auto question (or dimension) for every
    transcript and judge (a walk asks only the questions its answers lead to)."""
    prompts = prompts or Prompts.default()
    out = []
    for c in conversations:
        text, order = prompts.conversation(c["turns"])
        if mode == "dimension":
            qs = []
            for d in rubric.dimensions:
                dq = dimension_questions(rubric, d)
                if dq:
                    qs.append(JudgeQuestion(d, dimension_messages(dq, text, prompts, order), dimension_model(
                        tuple(x.id for x in dq), tuple(x.labels for x in dq))))
        else:
            qs = [JudgeQuestion(q.id, question_messages(q, text, prompts, reasons, order),
                                answer_model(q.labels, reasons))
                  for q in rubric.questions if not q.auto_answer]
        out.extend(judge_calls(qs, judges, temperature=temperature, max_tokens=max_tokens))
    return out


# -- ``--criteria task``: the conversation judged against its support task's own criteria ----------

#: the stage criteria judging is accounted under (budget, progress, calls.jsonl)
CRITERIA_STAGE = "criteria judging"
#: a criteria record whose conversation had a judge call fail after every retry: never scored
JUDGE_CALL_FAILURE = "judge_call_failure"


def _assistant_blank(turns: Sequence[Mapping[str, Any]], scope: str) -> bool:
    """Nothing to judge: the final assistant turn is blank (final scope) or every one is
    (anywhere scope). Such a conversation earns nothing on any criterion, unjudged (E.6)."""
    replies = [str(t.get("content") or "").strip() for t in turns if t.get("role") == "assistant"]
    if not replies:
        return True
    return not replies[-1] if scope == "final" else not any(replies)


def criteria_questions(conversation: Mapping[str, Any], criteria: Sequence[Criterion],
                       scope: str) -> list[JudgeQuestion]:
    """One question per criterion, keyed (conversation id, criterion id): support's prompts
    (:func:`carebench.criteria.criterion_question`) over the simulated transcript."""
    return [criterion_question((conversation["id"], c.id), conversation["turns"], c, scope)  # type: ignore[arg-type]
            for c in criteria]


@dataclass
class CriteriaResult:
    records: list[dict[str, Any]]
    stopped: str | None = None
    #: conversations left out because the budget stopped judging before all their questions
    cut: int = 0


def judge_criteria(run: Any, conversations: Sequence[Mapping[str, Any]],
                   criteria: Mapping[str, Sequence[Criterion]], judges: Sequence[Judge], *,
                   scope: str = "anywhere", temperature: float = 0.0,
                   max_tokens: int = JUDGE_MAX_TOKENS) -> CriteriaResult:
    """Every judge on every criterion of every conversation's task, in one batch through
    ``run.calls`` (stage ``criteria judging``: cached, budgeted, resumable).

    ``criteria`` maps a persona id to its task's criteria. One record per conversation
    (``kind: criteria``) holds the criteria and every vote: a parse failure is a failed vote
    (``met`` None), never a verdict; a judge call that failed after every retry makes the
    record a ``judge_call_failure`` (never scored, counted, retried by a re-run). Pass only
    conversations that finished: a harness-failed one is never judged."""
    questions: list[JudgeQuestion] = []
    per_conv: list[tuple[Mapping[str, Any], Sequence[Criterion], bool]] = []
    for c in conversations:
        crit = criteria[c["persona"]]
        empty = _assistant_blank(c["turns"], scope)
        per_conv.append((c, crit, empty))
        if not empty:
            questions.extend(criteria_questions(c, crit, scope))
    answers, res = ask(questions, judges, run, stage=CRITERIA_STAGE, description="criteria verdicts",
                       temperature=temperature, max_tokens=max_tokens)
    by_conv: dict[str, list[Any]] = {}
    for a in answers:
        by_conv.setdefault(a.key[0], []).append(a)
    out = CriteriaResult([], res.stopped)
    for c, crit, empty in per_conv:
        mine = by_conv.get(c["id"], [])
        if any(a.completion is None for a in mine):  # not asked: the budget stopped the run
            out.cut += 1
            continue
        votes = [{"criterion_id": a.key[1], "judge": a.judge, "status": a.status,
                  "met": getattr(a.value, "met", None) if a.status == "ok" else None,
                  "rationale": a.rationale, "error": a.error} for a in mine]
        failed_call = any(a.status == "error" for a in mine)
        out.records.append({
            "kind": "criteria", "conversation_id": c["id"], "persona": c["persona"],
            "risk_level": c.get("risk_level", "unknown"), "simulator": c.get("simulator"),
            "chatbot": c["chatbot"], "repeat": c.get("repeat", 0), "scope": scope,
            "status": JUDGE_CALL_FAILURE if failed_call else OK, "empty": empty,
            "criteria": [x.model_dump() for x in crit], "votes": votes})
    return out


def planned_criteria_calls(conversations: Sequence[Mapping[str, Any]],
                           criteria: Mapping[str, Sequence[Criterion]], judges: Sequence[Judge], *,
                           scope: str = "anywhere", temperature: float = 0.0,
                           max_tokens: int = JUDGE_MAX_TOKENS) -> list[Any]:
    """The calls of :func:`judge_criteria` for a dry run: conversations x criteria x judges."""
    qs = [q for c in conversations for q in criteria_questions(c, criteria[c["persona"]], scope)]
    return judge_calls(qs, judges, temperature=temperature, max_tokens=max_tokens)
