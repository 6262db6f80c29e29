"""The two ways construction talks to models, both through the command's one run.

Every model call goes through :meth:`carebench.engine.run.Run.calls` (cache, retries, the
run-wide budget, ``calls.jsonl``, per-stage accounting): JSON answers through
:func:`ask_json` (screening classifier, persona sketch and pick, construction judge),
free text through :func:`generate` (rewrites) and API embeddings through
:func:`embedding_calls`. A batch the budget cut short raises :class:`StageStopped`:
later prompts depend on earlier answers, so the step stops there and nothing it
half-did is used; the command marks the step incomplete and exits 3.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from carebench.engine.run import Run
from carebench.engine.runner import Call, RunResult
from carebench.judging import Judge, JudgeAnswer, JudgeQuestion, judge_calls, read_answers
from carebench.models.base import ChatModel
from carebench.types import ChatRequest, Completion, Message, RunStopped

#: the status of a row whose call failed after every retry (the server, not the model):
#: the row is neither judged nor released and never counts against a configuration
HARNESS_FAILURE = "harness_failure"


def answer_status(a: JudgeAnswer) -> str:
    """An answer's status, ``harness_failure`` for a call that failed every retry."""
    return HARNESS_FAILURE if a.completion is not None and a.completion.harness_failure else a.status


class StageStopped(RunStopped):
    """The run's budget cut a batch short; ``batch`` names it."""

    def __init__(self, batch: str, why: str):
        super().__init__(f"{batch} stopped ({why})")
        self.batch = batch


def run_batch(run: Run, stage: str, calls: Sequence[Call]) -> RunResult:
    """One batch under ``stage``; a budget stop inside it stops the step."""
    res = run.calls(calls, stage, stage=stage)
    if res.stopped:
        raise StageStopped(stage, res.stopped)
    return res


def embedding_calls(run: Run, stage: str = "embeddings") -> Callable[[Sequence[Call], str], RunResult]:
    """``Run.calls`` for an API embedder: its batches count under one stage (budget,
    cache, ``calls.jsonl``) and a budget stop stops the step."""
    return lambda calls, description: run_batch(run, stage, calls)


def ask_json(
    run: Run,
    stage: str,
    model: ChatModel,
    items: Sequence[tuple[Any, str, str]],
    answer: type[BaseModel],
    *,
    max_tokens: int,
    temperature: float = 0.0,
) -> list[JudgeAnswer]:
    """One JSON answer per ``(key, system, user)`` from ``model``; failed calls and
    unparseable answers are answers with a status (``error``/``parse_error``)."""
    if not items:
        return []
    qs = [JudgeQuestion(k, (Message("system", s), Message("user", u)), answer) for k, s, u in items]
    judges = [Judge(str(model.spec), model)]
    res = run_batch(run, stage, judge_calls(qs, judges, temperature=temperature, max_tokens=max_tokens))
    return read_answers(qs, judges, res.completions)


def generate(
    run: Run, stage: str, requests: Sequence[tuple[Any, ChatModel, tuple[Message, ...]]],
    *, max_tokens: int, temperature: float = 0.0,
) -> list[Completion]:
    """Free-text completions in request order."""
    if not requests:
        return []
    calls = [Call(m, ChatRequest(msgs, temperature=temperature, max_tokens=max_tokens), tag)
             for tag, m, msgs in requests]
    return list(run_batch(run, stage, calls).completions)  # type: ignore[arg-type]


def usable_text(comp: Completion | None) -> str | None:
    """The reply's text if the call succeeded with a complete, non-empty answer."""
    if comp is None or comp.status != "ok":
        return None
    text = comp.text.strip().strip('"').strip()
    return text or None
