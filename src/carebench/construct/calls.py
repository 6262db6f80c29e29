"""The two ways construction talks to models, and the run-wide ledger.

Every model call goes through the core runner (cache, retries, budget): JSON
answers through :func:`carebench.judging.ask` (screening classifier, persona
sketch and pick, construction judge) and free text through
:func:`generate` (rewrites). The :class:`Ledger` sums spend and calls across
stages, narrows each batch's budget to what is left of the run's cap, and
keeps every call for ``calls.jsonl``; a batch the budget stopped ends the stage
with :class:`BudgetReached`, which says how to resume (re-run: completed calls come
from the cache) and makes the CLI exit 3 like every budget stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from carebench.judging import Judge, JudgeAnswer, JudgeQuestion, ask
from carebench.models.base import ChatModel
from carebench.runner import Call, Runner, RunResult
from carebench.types import BudgetReached, ChatRequest, Completion, Message


@dataclass
class Ledger:
    """Spend, calls and stops across every batch of a construct run."""

    runner: Runner
    budget_usd: float | None = None
    spent_usd: float = 0.0
    provider_calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    call_rows: list[dict[str, Any]] = field(default_factory=list)
    by_stage: dict[str, dict[str, float]] = field(default_factory=dict)

    def batch_runner(self) -> Runner:
        """The run's one runner: its ledger carries the budget across every batch."""
        return self.runner

    def record(self, stage: str, res: RunResult) -> None:
        self.spent_usd += res.spent_usd
        self.provider_calls += res.provider_calls
        self.cache_hits += res.cache_hits
        self.errors += res.errors
        self.call_rows.extend(res.call_records())
        s = self.by_stage.setdefault(stage, {"calls": 0, "provider_calls": 0, "cache_hits": 0, "spent_usd": 0.0,
                                             "errors": 0})
        s["calls"] += len(res.calls)
        s["provider_calls"] += res.provider_calls
        s["cache_hits"] += res.cache_hits
        s["spent_usd"] += res.spent_usd
        s["errors"] += res.errors
        if res.stopped:
            raise BudgetReached(self._stop_message(stage, res.stopped))

    def _stop_message(self, stage: str, why: str) -> str:
        msg = f"{stage} stopped ({why}) after ${self.spent_usd:.2f} on {self.provider_calls} calls; "
        if self.runner.cache is None:
            return msg + "the cache is off (--no-cache), so re-running pays for every call again"
        return msg + "re-run the same command without --budget (or with a larger one) to resume from the cache"

    def summary(self) -> dict[str, Any]:
        return {"spent_usd": self.spent_usd, "provider_calls": self.provider_calls,
                "cache_hits": self.cache_hits, "errors": self.errors, "by_stage": self.by_stage}


def ask_json(
    ledger: Ledger,
    stage: str,
    model: ChatModel,
    items: Sequence[tuple[Any, str, str]],
    answer: type[BaseModel],
    *,
    max_tokens: int,
    temperature: float = 0.0,
) -> list[JudgeAnswer]:
    """One JSON answer per ``(key, system, user)`` from ``model``; failures are answers
    with a status (``parse_error``/``error``), never exceptions."""
    if not items:
        return []
    qs = [JudgeQuestion(k, (Message("system", s), Message("user", u)), answer) for k, s, u in items]
    runner = ledger.batch_runner()
    runner.config.description = stage
    answers, res = ask(qs, [Judge(str(model.spec), model)], runner, temperature=temperature, max_tokens=max_tokens)
    ledger.record(stage, res)
    return answers


def generate(
    ledger: Ledger, stage: str, requests: Sequence[tuple[Any, ChatModel, tuple[Message, ...]]],
    *, max_tokens: int, temperature: float = 0.0,
) -> list[Completion | None]:
    """Free-text completions in request order (``None`` only if the run stopped)."""
    if not requests:
        return []
    calls = [Call(m, ChatRequest(msgs, temperature=temperature, max_tokens=max_tokens), tag)
             for tag, m, msgs in requests]
    res = ledger.batch_runner().run_sync(calls, description=stage)
    ledger.record(stage, res)
    return list(res.completions)


def usable_text(comp: Completion | None) -> str | None:
    """The reply's text if the call succeeded with a complete, non-empty answer."""
    if comp is None or comp.status != "ok":
        return None
    text = comp.text.strip().strip('"').strip()
    return text or None
