"""Async execution of model calls: per-model concurrency, bounded retries, timeouts,
cache, cost/latency accounting, budget cap and a progress bar.

Suites build a list of ``Call``s and hand it to ``Runner.run``; they never talk to a
provider directly, so every call is cached, retried and accounted the same way.
One ``Runner`` (owned by the run context, :mod:`carebench.engine.run`) serves every batch of
a command, and its :class:`Ledger` carries spend and the budget across batches: a
budget that reset per batch was no cap at all.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from carebench.engine.cache import CacheWriter, CompletionCache, cache_key
from carebench.models.base import Call, ChatModel, PermanentError, TransientError, Unreachable
from carebench.models.pricing import call_cost_bound, is_priced
from carebench.types import GAVE_UP, CarebenchError, ChatRequest, Completion, is_context_overflow


@dataclass
class RunnerConfig:
    concurrency: int | None = None  # per model; None -> the provider's default
    concurrency_by_model: dict[str, int] = field(default_factory=dict)  # spec -> limit override
    max_retries: int = 6  # retries after the first try, for transient failures only
    timeout_s: float = 120.0  # per try
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    batch_prices: bool = False  # plans priced at the models' batch rates (--dry-run --batch)
    use_cache: bool = True
    progress: bool = True
    description: str = "model calls"


@dataclass
class Ledger:
    """Run-wide money and call accounting, shared by every batch of one run.

    A call is *started* only if the committed spend, plus the worst-case cost of the
    calls already in flight, plus its own worst case stays within the budget; calls
    in flight always finish and are kept. Once a call is refused the ledger stays
    stopped: later batches are answered from the cache only.
    """

    budget_usd: float | None = None
    spent_usd: float = 0.0
    reserved_usd: float = 0.0  # worst-case cost of the calls in flight
    provider_calls: int = 0
    cache_hits: int = 0
    shared: int = 0
    errors: int = 0
    not_made: int = 0  # calls refused by the budget (or skipped after it stopped)
    #: cache keys of the refused calls, for "calls left": a call refused in several batches or
    #: positions (identical requests share one provider call) is one call still to make
    refused: set[str] = field(default_factory=set, repr=False)
    stopped: str | None = None

    def reserve(self, worst_usd: float) -> bool:
        """Book a call's worst-case cost; False (and stopped) if it would pass the budget."""
        if self.stopped is not None:
            return False
        b = self.budget_usd
        if b is not None and self.spent_usd + self.reserved_usd + worst_usd > b + 1e-12:
            self.stopped = f"budget of ${b:.2f} reached"
            return False
        self.reserved_usd += worst_usd
        return True

    def release(self, worst_usd: float) -> None:
        self.reserved_usd = max(0.0, self.reserved_usd - worst_usd)

    def settle(self, worst_usd: float, cost_usd: float) -> None:
        """A started call finished (answer or recorded error): book what it cost."""
        self.release(worst_usd)
        self.spent_usd += cost_usd
        self.provider_calls += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_usd": self.budget_usd, "spent_usd": self.spent_usd,
            "provider_calls": self.provider_calls, "cache_hits": self.cache_hits,
            "shared": self.shared, "errors": self.errors, "calls_not_made": self.not_made,
            "stopped": self.stopped,
        }


@dataclass
class RunResult:
    """One batch: completions in the order of the calls; ``None`` where a call was never
    made because the run's budget stopped it, with ``stopped`` saying why."""

    completions: list[Completion | None]
    stopped: str | None = None
    spent_usd: float = 0.0
    provider_calls: int = 0  # calls that reached a provider (cache misses)
    cache_hits: int = 0
    shared: int = 0  # identical calls in the batch answered by one provider call
    errors: int = 0
    elapsed_s: float = 0.0
    calls: list[Call] = field(default_factory=list)

    @property
    def not_made(self) -> int:
        return sum(c is None for c in self.completions)


def call_row(call: Call, comp: Completion) -> dict[str, Any]:
    """A ``calls.jsonl`` line: enough for ``replay:`` to answer the same request again
    (``batch``: answered through a provider's batch endpoint, at the batch price)."""
    row = {"model": str(call.model.spec), "tag": call.tag, "request": call.request.cache_payload(),
           "completion": comp.to_dict()}
    if comp.batch:
        row["batch"] = True
    return row


@dataclass
class CallPlan:
    """What ``--dry-run`` prints: how many distinct calls, how many already cached, estimated cost."""

    total: int
    cached: int
    to_make: int
    estimated_cost_usd: float
    by_model: dict[str, dict[str, Any]]
    unpriced: list[str] = field(default_factory=list)  # specs left out of the estimate


def call_key(call: Call) -> str:
    """The cache key of a call: its model spec, request and the model's request options."""
    opts = getattr(call.model, "request_options", None)  # cache_key leaves out empty options
    return cache_key(str(call.model.spec), call.request, opts.to_dict() if opts is not None else None)


def capped_request(call: Call) -> ChatRequest:
    """The request with the output cap the model will actually send (its options may raise
    it, e.g. room for a reasoning model's hidden tokens), for cost bounds."""
    opts = getattr(call.model, "request_options", None)
    if opts is None or opts.max_tokens is None:
        return call.request
    return replace(call.request, max_tokens=opts.max_tokens)


#: why a call handed to the batch sink was not made (see carebench.batch.export)
BATCH_PENDING = "waiting for batch results"


class Runner:
    def __init__(
        self,
        config: RunnerConfig | None = None,
        cache: CompletionCache | None = None,
        on_complete: Callable[[Call, Completion], None] | None = None,
        ledger: Ledger | None = None,
        batch: Any = None,
    ):
        self.config = config or RunnerConfig()
        #: batch mode (carebench.batch.export.BatchSink): a call the cache cannot answer is
        #: handed to it instead of the provider and not made now, like a budget-refused call
        self.batch = batch
        self.cache = cache if self.config.use_cache else None
        self.on_complete = on_complete
        self.ledger = ledger or Ledger()  # the run's (which holds the budget), else an uncapped one
        self._sems: dict[str, asyncio.Semaphore] = {}
        self._sems_loop: asyncio.AbstractEventLoop | None = None
        self._reached: set[str] = set()  # models that answered at least once
        #: commits answers from its own thread, as they arrive (see ``CacheWriter``)
        self._writer = CacheWriter(self.cache) if self.cache is not None else None

    # -- planning -----------------------------------------------------------------
    def plan(self, calls: Sequence[Call]) -> CallPlan:
        """Distinct calls, how many the cache already answers, and the cost of the rest.

        A reply's length is estimated from the cached replies of the same model in this
        plan where there are any (their mean), else from the request's output cap (the
        worst case); ``by_model[spec]["reply_lengths"]`` says which was used.
        """
        by_model: dict[str, dict[str, Any]] = {}
        todo: list[tuple[str, Call]] = []
        replied: dict[str, list[int]] = {}  # spec -> completion tokens of cached replies
        seen: set[str] = set()
        for c in calls:
            spec = str(c.model.spec)
            key = call_key(c)
            if key in seen:  # identical calls are made once (see ``run``)
                continue
            seen.add(key)
            m = by_model.setdefault(spec, {"calls": 0, "cached": 0, "estimated_cost_usd": 0.0,
                                           "reply_lengths": "output caps"})
            m["calls"] += 1
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                m["cached"] += 1
                replied.setdefault(spec, []).append(hit.usage.completion_tokens)
            else:
                todo.append((spec, c))
        cost = 0.0
        for spec, c in todo:
            if not is_priced(c.model.spec):  # no estimate is better than an invented $0
                by_model[spec]["priced"] = False
                continue
            lengths = replied.get(spec)
            out = None
            if lengths:
                out = round(sum(lengths) / len(lengths))
                if c.request.max_tokens:
                    out = min(out, c.request.max_tokens)
                by_model[spec]["reply_lengths"] = "cached replies"
            est = call_cost_bound(c.model.spec, capped_request(c), out, batch=self.config.batch_prices)
            by_model[spec]["estimated_cost_usd"] += est
            cost += est
        cached = sum(int(m["cached"]) for m in by_model.values())
        unpriced = [s for s, m in by_model.items() if m.get("priced") is False]
        return CallPlan(len(seen), cached, len(seen) - cached, cost, by_model, unpriced)

    # -- execution ----------------------------------------------------------------
    def run_sync(self, calls: Sequence[Call], description: str | None = None) -> RunResult:
        """Run on a fresh event loop, closing the models' connection pools before it ends."""
        out: list[RunResult] = []

        async def go() -> None:
            # the result is handed over outside the task: asyncio.run's clean-up formats
            # the main task's repr (signal.getsignal on its SIGINT handler), and that repr
            # holds the full repr of its result, every call and completion (~40 us a call)
            try:
                out.append(await self.run(calls, description))
            finally:
                for model in {id(c.model): c.model for c in calls}.values():
                    await model.aclose()

        asyncio.run(go())
        return out[0]

    async def run(self, calls: Sequence[Call], description: str | None = None) -> RunResult:
        calls = list(calls)
        loop = asyncio.get_running_loop()
        if self._sems_loop is not loop:  # semaphores are bound to the loop they first wait on
            self._sems, self._sems_loop = {}, loop
        res = RunResult(completions=[None] * len(calls), calls=calls)
        t0 = time.perf_counter()
        progress = _Progress(len(calls), description or self.config.description, self.config.progress,
                             spent=self.ledger.spent_usd)

        inflight: dict[str, asyncio.Future] = {}
        keys: list[str] = [""] * len(calls)  # computed once per call, kept for the refused set

        async def one(i: int, call: Call) -> None:
            spec = str(call.model.spec)
            key = keys[i] = call_key(call)
            first = inflight.get(key)
            if first is not None:  # an identical call of this batch (under way or answered): share
                # its answer; looked up before the cache, whose writer thread may or may not have
                # committed it yet, so the counts do not depend on that thread's timing
                comp = await asyncio.shield(first)
                res.shared += 1
                self.ledger.shared += 1
                res.completions[i] = comp
                if comp is not None:
                    self._deliver(call, comp)
                    progress.advance(0.0)
                return
            if self.cache is not None:
                hit = self.cache.get(key)
                if hit is not None:
                    res.completions[i] = hit
                    res.cache_hits += 1
                    self.ledger.cache_hits += 1
                    self._deliver(call, hit)
                    progress.advance(0.0)
                    return
            fut = inflight[key] = loop.create_future()
            comp = None
            try:
                comp = await self._provider_call(call, spec, key, res)
            finally:
                fut.set_result(comp)
            if comp is not None:
                res.completions[i] = comp
                self._deliver(call, comp)
                progress.advance(comp.cost_usd, comp.priced)

        with progress:
            try:
                async with asyncio.TaskGroup() as tg:
                    for i, c in enumerate(calls):
                        tg.create_task(one(i, c))
            except BaseExceptionGroup as eg:  # surface the first real cause, not the group
                raise eg.exceptions[0] from None
            finally:
                if self._writer is not None:  # every answer of the batch is committed before it
                    self._writer.flush()      # returns (and those of a batch cut short by an error)
        res.elapsed_s = time.perf_counter() - t0
        self.ledger.not_made += res.not_made
        if res.not_made:
            self.ledger.refused |= {k for k, comp in zip(keys, res.completions, strict=True) if comp is None}
            res.stopped = self.ledger.stopped or (
                BATCH_PENDING if self.batch is not None and self.batch.pending else None)
        return res

    async def _provider_call(self, call: Call, spec: str, key: str, res: RunResult) -> Completion | None:
        """One call through the model's semaphore, retries and the cache; None if the
        run's budget does not allow starting it."""
        if self.batch is not None and self.batch.add(call, key):
            return None  # written to the batch directory; answered by a later round
        queued = time.perf_counter()  # the call's queue wait starts here
        # an unpriced model's spend cannot be capped: the run refuses it in Run.model, before any call
        async with self._semaphore(call.model):
            worst = call_cost_bound(call.model.spec, capped_request(call))
            if not self.ledger.reserve(worst):
                return None
            try:
                comp, unreachable = await self._call_with_retries(call, queued)
            except BaseException:
                self.ledger.release(worst)
                raise
            self.ledger.settle(worst, comp.cost_usd)
        if unreachable and spec not in self._reached:
            raise CarebenchError(f"cannot reach {spec}: {comp.error}")
        self._reached.add(spec)
        res.provider_calls += 1
        res.spent_usd += comp.cost_usd
        if comp.error is not None:
            res.errors += 1
            self.ledger.errors += 1
            if self._writer is not None and is_context_overflow(comp.error):
                self._writer.put(key, comp)  # permanent for these inputs: kept, never re-paid
        elif self._writer is not None:
            # committed by the writer's thread within milliseconds, not at a later turn of
            # this loop: CPU work on the loop no longer delays it
            self._writer.put(key, comp)
        return comp

    def _deliver(self, call: Call, comp: Completion) -> None:
        if self.on_complete is not None:
            self.on_complete(call, comp)

    def _semaphore(self, model: ChatModel) -> asyncio.Semaphore:
        spec = str(model.spec)
        sem = self._sems.get(spec)
        if sem is None:
            n = (
                self.config.concurrency_by_model.get(spec)
                or self.config.concurrency
                or getattr(model, "default_concurrency", 8)
            )
            sem = self._sems[spec] = asyncio.Semaphore(max(1, n))
        return sem

    async def _call_with_retries(self, call: Call, queued: float) -> tuple[Completion, bool]:
        """The completion (or recorded error) and whether every try failed to connect;
        ``queued``: when the call started waiting (its queue wait ends as a try is sent)."""
        cfg = self.config
        spec = str(call.model.spec)
        last = ""
        unreachable = True
        sent = queued
        for attempt in range(cfg.max_retries + 1):
            sent = time.perf_counter()
            try:
                async with asyncio.timeout(cfg.timeout_s):  # no extra task per try, unlike wait_for
                    comp = await call.model.complete(call.request)
                comp.attempts_made = attempt + 1
                comp.model = comp.model or spec
                comp.latency_s = comp.latency_s or time.perf_counter() - sent  # service time
                if comp.queue_wait_s is None:  # a provider's own figure (replay's recorded one) is kept
                    comp.queue_wait_s = sent - queued
                return comp, False
            except PermanentError as e:
                return Completion(error=str(e), model=spec, attempts_made=attempt + 1,
                                  queue_wait_s=sent - queued), False
            except (TimeoutError, TransientError) as e:
                retry_after = getattr(e, "retry_after", None)
                last = str(e) or f"timed out after {cfg.timeout_s:g} s"
                unreachable = unreachable and isinstance(e, Unreachable)
            if attempt == cfg.max_retries:
                break
            delay = min(cfg.backoff_max_s, cfg.backoff_base_s * (2**attempt))
            delay *= 0.5 + random.random()  # jitter; not part of any reported result
            if retry_after is not None:
                delay = max(delay, min(retry_after, cfg.backoff_max_s * 4))
            await asyncio.sleep(delay)
        comp = Completion(
            error=f"{GAVE_UP} {cfg.max_retries + 1} tries: {last}",
            model=spec,
            attempts_made=cfg.max_retries + 1,
            queue_wait_s=sent - queued,
        )
        return comp, unreachable


class _Progress:
    """Progress (done/total, rate, ETA, spend so far); silent when disabled.

    On a terminal: a rich progress bar. Otherwise (a log file, CI, a pipe) a bar would
    print nothing until the end, so one plain line goes to stderr at the start, at most
    every ``CAREBENCH_PROGRESS_EVERY`` seconds (default 30) while calls finish, and at
    the end. Spend reads "unpriced" for models without a price, never "$0.0000"."""

    def __init__(self, total: int, description: str, enabled: bool, spent: float = 0.0):
        self.enabled = enabled and total > 0
        self.total = total
        self.spent = spent  # the run's spend so far, not only this batch's
        self.unpriced = False  # a finished call had no price: its cost is unknown, not $0
        self.description = description
        self._done = 0
        if self.enabled:
            from rich.console import Console

            console = Console(stderr=True)
            self._t0 = time.perf_counter()
            self._lines = not console.is_terminal
            if self._lines:
                self._every = _progress_every()
                self._last = self._t0
                return
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._p = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[spend]}"),
                console=console,
                transient=False,
                refresh_per_second=4,
            )
            self._task = self._p.add_task(description, total=total, spend="", rate="")
            self._next = 0.0  # when the bar is next handed the count

    def spend_text(self) -> str:
        """``$0.0123``, ``unpriced`` (no priced spend) or ``$0.0123 + unpriced``; nothing
        before the first call of a run has finished (its models' prices are not known yet)."""
        if self._done == 0 and self.spent == 0:
            return ""
        if not self.unpriced:
            return f"${self.spent:.4f}"
        return "unpriced" if self.spent == 0 else f"${self.spent:.4f} + unpriced"

    def line(self) -> str:
        """One plain progress line: done/total, rate, elapsed, ETA, spend."""
        dt = time.perf_counter() - self._t0
        rate = self._done / dt if dt > 0 else 0.0
        eta = f", ETA {(self.total - self._done) / rate:.0f} s" if rate > 0 and self._done < self.total else ""
        spend = self.spend_text()
        return (f"{self.description}: {self._done}/{self.total} ({rate:.1f}/s, {dt:.0f} s{eta})"
                + (f", {spend}" if spend else ""))

    def _say(self) -> None:
        print(self.line(), file=sys.stderr, flush=True)

    def __enter__(self) -> _Progress:  # noqa: PYI034
        if self.enabled:
            if self._lines:
                self._say()
            else:
                self._p.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            if self._lines:
                self._say()
            else:  # the last count, if the throttle held it back
                self._p.update(self._task, completed=self._done, spend=self.spend_text())
                self._p.__exit__(*exc)

    def advance(self, cost: float, priced: bool = True) -> None:
        if not self.enabled:
            return
        self.spent += cost
        self.unpriced = self.unpriced or not priced
        self._done += 1
        now = time.perf_counter()
        if self._lines:
            if now - self._last >= self._every and self._done < self.total:
                self._last = now
                self._say()
            return
        # the bar redraws 4 times a second: hand it the count at most 10 times a second
        # (and the last call), not on every call
        if now < self._next and self._done < self.total:
            return
        self._next = now + 0.1
        dt = now - self._t0
        rate = f"{self._done / dt:.1f}/s" if dt > 0 else ""
        self._p.update(self._task, completed=self._done, spend=self.spend_text(), rate=rate)


def _progress_every() -> float:
    """Seconds between plain progress lines (``CAREBENCH_PROGRESS_EVERY``, default 30)."""
    raw = os.environ.get("CAREBENCH_PROGRESS_EVERY", "")
    try:
        return max(0.0, float(raw)) if raw.strip() else 30.0
    except ValueError:
        raise CarebenchError(f"CAREBENCH_PROGRESS_EVERY={raw!r} is not a number of seconds") from None
