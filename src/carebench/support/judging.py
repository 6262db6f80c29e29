"""Support's judge questions: one rubric criterion about one conversation.

In final-turn scope (default) only the last assistant message can earn credit
(DistressBench, §3.1); credit-anywhere scope is the §4.5 sensitivity variant.
:func:`judge_responses` turns responses into verdict records; an empty final
turn is recorded as ``not_judged_empty`` without any judge call (§3.2, E.6).
The generic machinery (questions, seats, parsing, :func:`ask`) is
:mod:`carebench.judging`; the criterion question and its prompts are
:mod:`carebench.criteria`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from carebench.criteria import (
    Criterion,
    Scope,
)
from carebench.criteria import criterion_question as core_question
from carebench.engine.run import Run
from carebench.judging import JUDGE_MAX_TOKENS, Judge, JudgeQuestion, ask
from carebench.support.records import ResponseRecord, VerdictRecord, is_empty_reply
from carebench.support.tasks import Task


def criterion_question(
    response: ResponseRecord, criterion: Criterion, scope: Scope = "final"
) -> JudgeQuestion:
    """The core question (:func:`carebench.criteria.criterion_question`) keyed by support's
    cell: (task, responder, attempt, criterion, scope)."""
    key = (response.task_id, response.responder, response.attempt, criterion.id, scope)
    return core_question(key, response.turns, criterion, scope)


@dataclass
class JudgingResult:
    verdicts: list[VerdictRecord]  # only answered (or deliberately not judged) ones
    not_judged: int  # verdict records written for empty final turns (no call)
    stopped: str | None = None  # the run's budget stopped judging
    calls_skipped: int = 0  # judge calls of questions never asked after the stop


#: Judge questions per runner batch: bounds memory on seed-scale runs (1.6 M verdicts).
JUDGE_BATCH = 20_000


def judge_responses(
    tasks: Sequence[Task],
    responses: Sequence[ResponseRecord],
    judges: Sequence[Judge],
    run: Run,
    *,
    stage: str = "judging",
    description: str = "judge verdicts",
    scopes: Sequence[Scope] = ("final",),
    temperature: float = 0.0,
    max_tokens: int = JUDGE_MAX_TOKENS,
    batch: int = JUDGE_BATCH,
) -> JudgingResult:
    """One verdict record per (response, criterion, judge, scope), in response order.

    Empty final turns get ``not_judged_empty`` records (met None) and no call: they
    score zero (E.6). Everything else is asked in runner batches of about ``batch``
    questions (each through ``run`` under ``stage``); a budget stop ends judging after the batch that hit it, keeping only
    the verdicts that were answered (an unasked question is never a verdict).
    """
    by_id = {t.id: t for t in tasks}
    verdicts: list[VerdictRecord] = []
    out = JudgingResult(verdicts, 0)
    questions: list[JudgeQuestion] = []

    def flush() -> None:
        answers, res = ask(questions, judges, run, stage=stage, description=description,
                           temperature=temperature, max_tokens=max_tokens)
        for a in answers:
            if a.completion is None:  # not asked: the budget stopped the run
                continue
            task_id, responder, attempt, cid, scope = a.key
            met = getattr(a.value, "met", None) if a.status == "ok" else None
            verdicts.append(
                VerdictRecord(task_id, responder, attempt, cid, a.judge, met, a.rationale, a.status, scope)
            )
        out.stopped = out.stopped or res.stopped
        questions.clear()

    def cut() -> bool:
        """Ask nothing more once the budget stopped the run. Calls waiting for batch results
        (batch mode) stop nothing: every question of the round is written at once."""
        return out.stopped is not None and run.ledger.stopped is not None

    for r in responses:
        if r.is_harness_failure:  # no reply to judge; excluded from scores and counted
            continue
        task = by_id[r.task_id]
        for scope in scopes:
            # credit-anywhere scope judges earlier turns even when the final one is blank (§4.5, B.9)
            empty = is_empty_reply(r.final_reply, r.status) if scope == "final" else r.all_turns_blank
            for c in task.criteria:
                if empty:
                    out.not_judged += len(judges)
                    verdicts.extend(
                        VerdictRecord(r.task_id, r.responder, r.attempt, c.id, j.label, None,
                                      "final assistant turn is empty: scored zero without judging"
                                      if scope == "final" else
                                      "every assistant turn is empty: scored zero without judging",
                                      "not_judged_empty", scope)
                        for j in judges
                    )
                else:
                    questions.append(criterion_question(r, c, scope))
        if cut():
            out.calls_skipped += len(scopes) * len(task.criteria) * len(judges) * (not empty)
            continue
        if len(questions) >= batch:
            flush()
    if questions and not cut():
        flush()
    order = {(r.task_id, r.responder, r.attempt): i for i, r in enumerate(responses)}
    verdicts.sort(key=lambda v: (order[(v.task_id, v.responder, v.attempt)], v.scope != "final"))
    return out
