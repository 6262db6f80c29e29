"""One ledger for every model call of a plural command.

Profile methods call the model in several rounds (zero-shot traces, guideline
distillation, GEPA's evaluations and reflections, predictions). Each round goes
through the same Runner, so every call is cached and resumable, and through this
ledger, which carries the run-wide budget from round to round, records every call
for ``calls.jsonl`` and stops the command when the budget is reached or a call
failed: a failed call is a harness failure and is never scored as the model's
answer (re-running retries it; completed calls come from the cache).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from carebench.runner import Call, CallPlan, Runner
from carebench.types import BudgetReached, CarebenchError, Completion


class HarnessFailure(CarebenchError):
    """A model call failed after its retries; its case cannot be scored."""


@dataclass
class Ledger:
    runner: Runner
    budget_usd: float | None = None
    spent_usd: float = 0.0
    provider_calls: int = 0
    cache_hits: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    planned: list[Call] = field(default_factory=list)
    dry_run: bool = False

    def ask(self, calls: Sequence[Call], description: str = "model calls") -> list[Completion]:
        """Completions in call order; raises on budget stop or on any failed call."""
        if not calls:
            return []
        if self.budget_usd is not None:
            # the runner's own ledger carries spend across rounds: give it the whole cap
            self.runner.ledger.budget_usd = self.budget_usd
            if self.runner.ledger.stopped or self.spent_usd >= self.budget_usd:
                raise BudgetReached(self._stop_message(f"budget of ${self.budget_usd:.2f} reached"))
        self.runner.config.description = description
        res = self.runner.run_sync(calls)
        self.spent_usd += res.spent_usd
        self.provider_calls += res.provider_calls
        self.cache_hits += res.cache_hits
        self.rows.extend(res.call_records())
        if res.stopped:
            raise BudgetReached(self._stop_message(res.stopped))
        failed = [c for c in res.completions if c is not None and c.status == "error"]
        if failed:
            raise HarnessFailure(
                f"{len(failed)} of {len(calls)} {description} failed (first: {failed[0].error}); "
                "re-run the same command to retry them (completed calls are cached)"
            )
        return [c for c in res.completions if c is not None]

    def plan(self, calls: Sequence[Call]) -> CallPlan:
        return self.runner.plan(calls)

    def _stop_message(self, why: str) -> str:
        return f"stopped: {why} after ${self.spent_usd:.4f}; re-run the same command to resume from the cache"

    def accounting(self) -> dict[str, Any]:
        return {"spent_usd": self.spent_usd, "provider_calls": self.provider_calls,
                "cache_hits": self.cache_hits, "calls_recorded": len(self.rows)}
