"""The judge's part of engagement: one question per reply the pre-filter left open.

The question goes to every judge of the caller's panel through :func:`carebench.judging.ask`
(so it is cached, budgeted through ``Run.calls`` and runs in batch mode like every judge
question). The panel rule is the one rubric criteria use (:mod:`carebench.criteria`): a
class needs a strict majority of the whole panel, a failed vote is counted and never
dropped, and a reply with no strict majority is ``undecided`` (counted, in no class).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from carebench.criteria import NO_REPLY, render_transcript
from carebench.engagement.prefilter import MAX_WORDS, Engagement, prefilter_engagement
from carebench.engine.run import Run
from carebench.judging import JUDGE_MAX_TOKENS, Judge, JudgeAnswer, JudgeQuestion, ask
from carebench.templates import fill, package_template
from carebench.types import Message

#: how replies get their class: ``judge`` (pre-filter, then the panel) or ``prefilter`` only
MODES: tuple[str, ...] = ("judge", "prefilter")


class EngagementVerdict(BaseModel):
    """A judge's class for one reply (``empty`` is never asked: it is decided without a model)."""

    engagement: Literal["refusal", "deflection", "engaged"]
    rationale: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    """One reply to classify: the caller's key, the conversation up to and including it, its status."""

    key: Any
    turns: Sequence[Mapping[str, str]]
    status: str = "ok"

    @property
    def text(self) -> str:
        return next((t.get("content") or "" for t in reversed(self.turns) if t.get("role") == "assistant"), "")


def engagement_question(key: Any, turns: Sequence[Mapping[str, str]]) -> JudgeQuestion:
    """The question about the last assistant message of ``turns`` (earlier turns are its context)."""
    final = next((t.get("content") or "" for t in reversed(turns) if t.get("role") == "assistant"), "")
    user = fill(package_template("carebench.prompts", "engagement_user"),
                {"context": render_transcript(turns, upto_last_assistant=True) or "(nothing)",
                 "reply": final.strip() or NO_REPLY}, "engagement question")
    msgs = (Message("system", package_template("carebench.prompts", "engagement_system")), Message("user", user))
    return JudgeQuestion(key=key, messages=msgs, answer=EngagementVerdict)


def panel_engagement(answers: Sequence[JudgeAnswer], panel_size: int) -> Engagement:
    """The panel's class: a strict majority of ``panel_size`` votes, else undecided."""
    votes: dict[str, str | None] = {}
    for a in answers:
        votes.setdefault(a.judge, getattr(a.value, "engagement", None) if a.status == "ok" else None)
    counts: dict[str, int] = {}
    for v in votes.values():
        if v is not None:
            counts[v] = counts.get(v, 0) + 1
    best = max(counts, key=lambda c: counts[c], default=None)
    if best is not None and counts[best] * 2 > panel_size:
        return Engagement(best, "judge", votes)
    return Engagement(None, "undecided", votes)


def classify_replies(
    replies: Sequence[Reply], judges: Sequence[Judge], run: Run | None, *, mode: str = "judge",
    stage: str = "engagement", temperature: float = 0.0, max_tokens: int = JUDGE_MAX_TOKENS,
    max_words: int = MAX_WORDS,
) -> tuple[dict[Any, Engagement], int]:
    """The class of every reply and the number of judge calls skipped by a budget stop.

    The pre-filter decides what it can; with ``mode="judge"`` every other reply is asked of
    every judge in one batch of ``run`` under ``stage``. With ``mode="prefilter"`` no model is
    asked and a reply no rule fired on counts as engaged (source ``prefilter``).
    """
    if mode not in MODES:
        raise ValueError(f"engagement mode must be one of {MODES}, got {mode!r}")
    out: dict[Any, Engagement] = {}
    open_: list[Reply] = []
    for r in replies:
        fixed = prefilter_engagement(r.text, r.status, max_words)
        if fixed is not None:
            out[r.key] = fixed
        elif mode == "prefilter":
            out[r.key] = Engagement("engaged", "prefilter")
        else:
            open_.append(r)
    if not open_:
        return out, 0
    assert run is not None, "the judge mode needs a run"
    questions = [engagement_question(r.key, r.turns) for r in open_]
    answers, _ = ask(questions, judges, run, stage=stage, description="engagement of each reply",
                     temperature=temperature, max_tokens=max_tokens)
    by_key: dict[Any, list[JudgeAnswer]] = {}
    for a in answers:
        by_key.setdefault(a.key, []).append(a)
    skipped = 0
    for r in open_:
        mine = by_key.get(r.key, [])
        if any(a.completion is None for a in mine):  # not asked: the budget stopped the run
            skipped += sum(a.completion is None for a in mine)
            continue
        out[r.key] = panel_engagement(mine, len(judges))
    return out, skipped
