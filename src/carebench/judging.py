"""Judge questions: one model call per (question, judge), answered as validated JSON.

Shared by every suite that asks models to judge something (the support panel's
criterion verdicts, the plural jury's category verdicts, the construction judge),
so that seats, request building, parsing and failure handling are one code path.

A :class:`JudgeQuestion` carries the messages and the pydantic answer model;
:func:`ask` sends every question to every judge through the Runner and returns one
:class:`JudgeAnswer` per pair. A judge whose output does not parse leaves a
recorded ``parse_error`` answer, never an exception and never a silent gap.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from carebench.engine.run import Run
from carebench.engine.runner import Call, RunResult
from carebench.models.base import ChatModel
from carebench.models.structured import Parsed, json_spec, parse_model
from carebench.types import ChatRequest, Completion, Message

AnswerStatus = Literal["ok", "parse_error", "error"]

#: Judge output cap: a verdict plus a short rationale needs far less.
JUDGE_MAX_TOKENS = 400


class BinaryVerdict(BaseModel):
    """A met / not-met verdict on one criterion with the judge's reason."""

    met: bool
    rationale: str = ""


class CategoryVerdict(BaseModel):
    """An appropriateness judgment plus the set of satisfied response categories."""

    appropriate: bool
    categories: list[str] = Field(default_factory=list)
    rationale: str = ""


@dataclass(frozen=True, slots=True)
class JudgeQuestion:
    """One thing to ask every judge. ``key`` is the caller's handle, returned as is.

    ``categories`` is the vocabulary a :class:`CategoryVerdict` may name: the *whole*
    category field (e.g. every RESPONSE category of the taxonomy), never only the
    categories a reference policy expects. A judge naming a real category outside
    the reference is giving an answer (scored as a disagreement), not a parse error;
    only names outside the vocabulary are. ``aliases`` maps other accepted spellings
    (e.g. a category's name) to its canonical entry (e.g. its code).
    """

    key: Any
    messages: tuple[Message, ...]
    answer: type[BaseModel] = BinaryVerdict
    categories: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()


def category_question(key: Any, system: str, user: str, categories: Sequence[str] | None = None,
                      aliases: Mapping[str, str] | None = None) -> JudgeQuestion:
    """A jury question (VEILED-SH §5.3): is the response appropriate, which response
    categories does it satisfy, and why.

    ``categories`` defaults to the full RESPONSE vocabulary of the taxonomy (codes,
    with the category names accepted as aliases), so answers are checked against
    every category there is, not against what one reference policy expects.
    """
    if categories is None:
        from carebench.taxonomy import load_taxonomy

        response = load_taxonomy().response
        categories = [c.code for c in response]
        aliases = {**{c.name: c.code for c in response}, **(aliases or {})}
    return JudgeQuestion(key, (Message("system", system), Message("user", user)), CategoryVerdict,
                         tuple(categories), tuple((aliases or {}).items()))


@dataclass(slots=True)
class JudgeAnswer:
    key: Any
    judge: str  # panel label of the judge (its spec, or spec#k for a repeated spec)
    status: AnswerStatus
    value: BaseModel | None
    rationale: str = ""
    raw: str = ""
    error: str | None = None
    completion: Completion | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Judge:
    """A panel seat: a model and the label its votes carry.

    A spec listed twice gets distinct labels (``spec#2``) and a distinct
    ``ChatRequest.attempt``, so its seats are separate samples rather than one
    cached answer counted twice.
    """

    label: str
    model: ChatModel
    seat: int = 0


def panel_seats(specs: Sequence[str], models: Sequence[ChatModel]) -> list[Judge]:
    """Give every judge a label; repeats of a spec become ``spec#2``, ``spec#3``..."""
    seen: dict[str, int] = {}
    out = []
    for spec, model in zip(specs, models, strict=True):
        k = seen.get(spec, 0)
        seen[spec] = k + 1
        out.append(Judge(spec if k == 0 else f"{spec}#{k + 1}", model, k))
    return out


def judge_request(
    q: JudgeQuestion, seat: int = 0, temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS
) -> ChatRequest:
    """Identical questions build identical requests, so they share one cached call.

    Repeated seats of one spec are separate samples (``attempt`` = seat) when
    sampling; at temperature 0 they would repeat the same answer, so they share it.
    """
    sampled = temperature > 0 and seat > 0
    return ChatRequest(
        messages=q.messages,
        temperature=temperature,
        max_tokens=max_tokens,
        structured=json_spec(q.answer, name=q.answer.__name__.lower()),
        attempt=seat if sampled else 0,
        seed=seat if sampled else None,
    )


def parse_answer(q: JudgeQuestion, comp: Completion | None) -> tuple[AnswerStatus, BaseModel | None, str | None]:
    """Validate a judge's output; failures are outcomes (status + message), not exceptions."""
    if comp is None:
        return "error", None, "call not made (run stopped)"
    if comp.status == "error":
        return "error", None, comp.error or "call failed"
    parsed = parse_model(comp.text, q.answer)
    if not parsed.ok and comp.status == "truncated":
        salvaged = _SALVAGE.get(q.answer, lambda _t: None)(comp.text)
        if salvaged is not None:
            parsed = Parsed(salvaged, comp.text)
    if not parsed.ok:
        why = parsed.error or "unparseable"
        if comp.status != "ok":
            why = f"{comp.status}: {why}"
        return "parse_error", None, why
    value = parsed.value
    if isinstance(value, CategoryVerdict) and q.categories:
        canon = {a.strip().lower(): c for a, c in q.aliases}
        canon.update({c.strip().lower(): c for c in q.categories})
        cats: list[str] = []
        for c in value.categories:
            hit = canon.get(str(c).strip().lower())
            if hit is None:
                return "parse_error", None, f"unknown category {c!r}; the vocabulary is {list(q.categories)}"
            if hit not in cats:
                cats.append(hit)
        try:
            value = CategoryVerdict(appropriate=value.appropriate, categories=cats, rationale=value.rationale)
        except ValidationError as e:  # pragma: no cover - fields already validated
            return "parse_error", None, str(e)
    return "ok", value, None


_LEADING_MET = re.compile(r'^\s*(?:```(?:json)?\s*)?\{\s*"met"\s*:\s*(true|false)\b(.*)', re.DOTALL | re.IGNORECASE)


def _salvage_truncated(text: str) -> BinaryVerdict | None:
    """A verdict whose *rationale* hit the output cap still states its verdict first
    (``met`` is the schema's first field): keep the verdict, mark the rationale cut."""
    m = _LEADING_MET.match(text)
    if m is None:
        return None
    rest = re.sub(r'^\s*,\s*"rationale"\s*:\s*"?', "", m.group(2))
    return BinaryVerdict(met=m.group(1).lower() == "true", rationale=f"[rationale cut off at the output cap] {rest}")


_LEADING_CATEGORIES = re.compile(
    r'^\s*(?:```(?:json)?\s*)?\{\s*"appropriate"\s*:\s*(true|false)\s*,\s*"categories"\s*:\s*(\[[^\]]*\])(.*)',
    re.DOTALL | re.IGNORECASE,
)


def _salvage_truncated_categories(text: str) -> CategoryVerdict | None:
    """A category verdict cut off inside its rationale: the decision and the complete
    category list come first in the schema, so they are kept (the cut is marked)."""
    m = _LEADING_CATEGORIES.match(text)
    if m is None:
        return None
    try:
        cats = json.loads(m.group(2))
    except ValueError:
        return None
    if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
        return None
    rest = re.sub(r'^\s*,\s*"rationale"\s*:\s*"?', "", m.group(3))
    return CategoryVerdict(appropriate=m.group(1).lower() == "true", categories=cats,
                           rationale=f"[rationale cut off at the output cap] {rest}")


_SALVAGE = {BinaryVerdict: _salvage_truncated, CategoryVerdict: _salvage_truncated_categories}


def ask(
    questions: Sequence[JudgeQuestion],
    judges: Sequence[Judge],
    run: Run,
    *,
    stage: str,
    description: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = JUDGE_MAX_TOKENS,
) -> tuple[list[JudgeAnswer], RunResult]:
    """Ask every question of every judge in one batch of the run (question-major order),
    accounted under ``stage`` (``description`` labels the progress bar; default the stage).

    Identical (model, request) pairs (the same reply judged twice, or repeated seats
    at temperature 0) are sent once by the runner, which shares the answer.
    """
    calls = judge_calls(questions, judges, temperature=temperature, max_tokens=max_tokens)
    result = run.calls(calls, description or stage, stage=stage) if calls else RunResult(completions=[])
    return read_answers(questions, judges, result.completions), result


def judge_calls(
    questions: Sequence[JudgeQuestion], judges: Sequence[Judge], *, temperature: float = 0.0,
    max_tokens: int = JUDGE_MAX_TOKENS,
) -> list[Call]:
    """The calls :func:`ask` makes, question-major, for a caller that runs them itself
    (e.g. through ``carebench.engine.run.Run.calls`` to account them under a stage)."""
    return [
        Call(j.model, judge_request(q, j.seat, temperature, max_tokens), {"question": _tag(q.key), "judge": j.label})
        for q in questions for j in judges
    ]


def read_answers(
    questions: Sequence[JudgeQuestion], judges: Sequence[Judge], completions: Sequence[Completion | None]
) -> list[JudgeAnswer]:
    """One answer per (question, judge) from the completions of :func:`judge_calls`
    (``None``: the call was never made)."""
    pairs = [(q, j) for q in questions for j in judges]
    answers = []
    for (q, j), comp in zip(pairs, completions, strict=True):
        status, value, err = parse_answer(q, comp)
        answers.append(
            JudgeAnswer(
                key=q.key,
                judge=j.label,
                status=status,
                value=value,
                rationale=str(getattr(value, "rationale", "") or (err or "")),
                raw=comp.text if comp is not None else "",
                error=err,
                completion=comp,
            )
        )
    return answers


def _tag(key: Any) -> Any:
    """A JSON-able form of a question key for calls.jsonl."""
    return list(key) if isinstance(key, tuple) else key
