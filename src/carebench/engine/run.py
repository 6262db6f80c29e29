"""The run context: one per command invocation, owning everything a run spends.

It owns the runner, the completion cache, the run-wide budget and spend (the
runner's :class:`~carebench.engine.runner.Ledger`), the call log written to
``calls.jsonl``, the model instances and the progress display. Every stage and
batch of every suite goes through :meth:`Run.calls`, so the budget is one cap for
the whole command: a budget that reset per batch once let a $5 run spend $65.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from carebench.engine.cache import CompletionCache, default_cache_path
from carebench.engine.options import RunOptions
from carebench.engine.runner import (
    BATCH_PENDING,
    Call,
    CallPlan,
    Ledger,
    Runner,
    RunnerConfig,
    RunResult,
    call_row,
)
from carebench.models.base import ModelSpec, SpecLike, parse_spec
from carebench.types import BatchPending, CarebenchError, Completion, RunStopped


class Run:
    """One command's run context (see the module docstring)."""

    def __init__(self, options: RunOptions | None = None, *, cache: CompletionCache | None = None):
        self.options = opts = options or RunOptions()
        if opts.budget_usd is not None and opts.budget_usd < 0:
            raise CarebenchError(f"--budget must be zero or more USD, got {opts.budget_usd}")
        if cache is None and opts.use_cache:
            path = Path(opts.cache_path) if opts.cache_path else default_cache_path()
            if opts.dry_run and not path.exists():  # a dry run writes nothing, not even an empty cache
                path = Path(":memory:")
            cache = CompletionCache(path)
        self.cache = cache if opts.use_cache else None
        self.ledger = Ledger(budget_usd=opts.budget_usd)
        self.call_rows: list[dict[str, Any]] = []
        if opts.max_retries is not None and opts.max_retries < 0:
            raise CarebenchError(f"--retries must be zero or more, got {opts.max_retries}")
        retries = {} if opts.max_retries is None else {"max_retries": opts.max_retries}
        batch = opts.batch
        if batch is None:  # a command not (yet) given --batch: CAREBENCH_BATCH_DIR, if set
            from carebench.batch.options import batch_options

            batch = batch_options(None)
        self.batch = None  # the batch sink (carebench.batch.export.BatchSink) in batch mode
        if batch is not None and not opts.dry_run:
            if self.cache is None:
                raise CarebenchError("--batch needs the cache (results are imported into it); drop --no-cache")
            from carebench.batch.export import BatchSink

            self.batch = BatchSink(batch)
        self.runner = Runner(
            RunnerConfig(concurrency=opts.concurrency, use_cache=opts.use_cache, progress=opts.progress,
                         timeout_s=opts.timeout_s, batch_prices=batch is not None, **retries),
            cache=self.cache, on_complete=self._log_call, ledger=self.ledger, batch=self.batch,
        )
        self._models: dict[ModelSpec, Any] = {}
        self._output_decisions: dict[str, Any] = {}  # server base URL -> its OutputDecision
        #: stage or method name -> why it was cut short (budget); shown as "incomplete"
        self.incomplete: dict[str, str] = {}
        self._calls_skipped = 0  # calls of stages never started because the budget stopped
        self._open_ended = False  # later work whose calls cannot be counted before earlier answers
        self._stage: str | None = None  # the stage of the batch in progress (for calls.jsonl rows)
        #: stage name -> calls, provider calls, cache hits, errors and spend of its batches
        self.by_stage: dict[str, dict[str, float]] = {}
        #: calls that failed after every retry (carebench.types.is_harness_failure), all batches
        self.failed_calls = 0

    # -- models ---------------------------------------------------------------------
    def model(self, spec: SpecLike, **options: Any) -> Any:
        """One provider instance per model spec for the whole run (``options`` are the
        provider's, e.g. an embedding model's ``batch_size``, used when it is first built).
        Commands hand it the ``ModelSpec`` they parsed from their flags; a spec string (a
        config file's, a test's) is parsed here.

        A budgeted run refuses a model without a price here, before any call: its spend
        could not be capped (the one place this is checked)."""
        ms = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
        if ms not in self._models:
            from carebench.models import get_model

            model = get_model(ms, timeout_s=self.options.timeout_s, concurrency=self.options.concurrency,
                              planning=self.options.dry_run, **options)
            if (model.spec.provider == "vllm" and model.spec.base_url is None and self.batch is None
                    and not self.options.dry_run):  # refused before any call, not at the first one
                from carebench.models.openai_compat import no_live_vllm

                raise CarebenchError(no_live_vllm(model.spec))
            if self.options.budget_usd is not None:
                from carebench.models.pricing import is_priced, unpriced_note

                if not is_priced(model.spec):  # its calls would count as $0
                    raise CarebenchError(
                        f"--budget cannot be enforced: {unpriced_note([str(model.spec)])}")
            decision = getattr(model, "output_decision", None)
            if decision is not None and model.spec.base_url is not None:
                # one structured-output decision per self-hosted server, not per model name
                # (see carebench.models.openai_compat.OutputDecision)
                model.output_decision = self._output_decisions.setdefault(
                    model.spec.base_url.rstrip("/"), decision)
            opts = self.options.model_options.get(str(ms))  # keyed by canonical spec text
            if opts:
                if not hasattr(model, "request_options"):
                    raise CarebenchError(f"model options for {ms}: this provider takes none")
                model.request_options = opts
            self._models[ms] = model
        return self._models[ms]

    def model_specs(self) -> list[str]:
        return [str(m.spec) for m in self._models.values()]

    def output_modes(self) -> dict[str, Any]:
        """How each model's structured requests were constrained, as decided by its
        capability probe (only models that received structured requests)."""
        return {str(m.spec): {"mode": m.structured_mode, "probe": list(getattr(m, "probe_log", []))}
                for m in self._models.values() if getattr(m, "structured_mode", None) is not None
                and getattr(m, "asked_structured", True)}

    def close(self) -> None:
        """Close every model (best effort: results are already written)."""
        for m in self._models.values():
            with contextlib.suppress(Exception):
                asyncio.run(m.aclose())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls ------------------------------------------------------------------------
    def calls(self, calls: Sequence[Call], description: str = "model calls", *, stage: str | None = None) -> RunResult:
        """Run one batch through the run's runner, cache and budget: the one way any
        module outside the run and the runner makes model (and embedding) calls.

        ``stage`` names the pipeline step the batch belongs to, so the manifest can say
        where the money went (several batches may share a stage); its ``calls.jsonl`` rows
        carry it too, so the per-stage figures can be checked from the call log. A batch
        given no stage is accounted under its ``description``."""
        stage = stage or description
        self._stage = stage
        try:
            res = self.runner.run_sync(calls, description=description)
        finally:
            self._stage = None
        self.failed_calls += sum(1 for c in res.completions if c is not None and c.harness_failure)
        if stage is not None:
            s = self.by_stage.setdefault(stage, {"calls": 0, "provider_calls": 0, "cache_hits": 0,
                                                 "errors": 0, "spent_usd": 0.0})
            s["calls"] += len(res.calls)
            s["provider_calls"] += res.provider_calls
            s["cache_hits"] += res.cache_hits
            s["errors"] += res.errors
            s["spent_usd"] += res.spent_usd
        return res

    def plan(self, calls: Sequence[Call]) -> CallPlan:
        return self.runner.plan(calls)

    def _log_call(self, call: Call, comp: Completion) -> None:
        row = call_row(call, comp)
        row["cached"] = comp.cached  # answered from the cache: not paid by this run
        if self._stage is not None:
            row["stage"] = self._stage
        self.call_rows.append(row)

    # -- budget -----------------------------------------------------------------------
    @property
    def stopped(self) -> str | None:
        """Why calls were not made: the budget, or (batch mode) calls waiting for results."""
        if self.ledger.stopped is not None:
            return self.ledger.stopped
        if self.batch is not None and self.batch.pending:
            return BATCH_PENDING
        return None

    def mark_incomplete(self, name: str, calls_skipped: int = 0, *, open_ended: bool = False) -> None:
        """Record that a stage or method was cut short by the budget; ``calls_skipped``
        counts calls of work never started (for the "calls left" figure). ``open_ended``:
        more work follows whose calls depend on answers not yet known, so the figure is
        only a lower bound."""
        self.incomplete[name] = self.stopped or "stopped"
        self._calls_skipped += calls_skipped
        self._open_ended = self._open_ended or open_ended

    @property
    def calls_left(self) -> int:
        """Distinct calls refused by the budget plus the calls of work never started."""
        return len(self.ledger.refused) + self._calls_skipped

    def accounting(self) -> dict[str, Any]:
        """What the manifest records about the run's calls and spend."""
        batch = {} if self.batch is None else {"batch": {
            "dir": str(self.batch.dir), "pending": len(self.batch.calls), "awaiting": len(self.batch.awaiting),
            "answered": sum(1 for r in self.call_rows if r.get("batch")),
            "answered_usd": sum(r["completion"]["cost_usd"] or 0.0 for r in self.call_rows if r.get("batch"))}}
        return {**self.ledger.to_dict(), **batch, "calls_recorded": len(self.call_rows),
                "calls_left": self.calls_left if self.stopped else 0,
                "incomplete": sorted(self.incomplete),
                **({"by_stage": self.by_stage} if self.by_stage else {})}

    def stop_message(self) -> str:
        led = self.ledger
        left = self.calls_left
        msg = (f"{led.stopped}: spent ${led.spent_usd:.2f} on {led.provider_calls} calls; "
               f"{'at least ' if self._calls_skipped or self._open_ended else ''}{left} call{'s' * (left != 1)} left; ")
        if self.cache is None:
            return msg + "the cache is off (--no-cache), so re-running pays for every call again"
        return msg + "re-run the same command without --budget (or with a larger one) to resume from the cache"

    def finish(self) -> None:
        """End of the run: raise :class:`RunStopped` (exit code 3) if the budget stopped it;
        in batch mode with calls pending, write them to the batch directory and raise
        :class:`BatchPending` (exit code 4). Call after the finished results are written."""
        if self.ledger.stopped is not None:
            raise RunStopped(self.stop_message())
        if self.batch is not None and self.batch.pending:
            b = self.options.budget_usd
            raise BatchPending(self.batch.write(budget=b, spent_live=self.ledger.spent_usd, cache=self.cache))
