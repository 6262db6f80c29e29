"""What the calibrate / freeze / label / agreement commands share: options, the
model environment and the run directory's bookkeeping."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.cache import CompletionCache
from carebench.models import get_model
from carebench.plural.calls import Ledger
from carebench.plural.profiles.base import Env
from carebench.rundir import write_jsonl, write_manifest
from carebench.runner import Runner, RunnerConfig

SUITE = "plural"


@dataclass
class RunOptions:
    model: str | None = None
    out: str | None = None
    cache_path: str | None = None
    use_cache: bool = True
    budget_usd: float | None = None
    dry_run: bool = False
    concurrency: int | None = None
    progress: bool = True
    seed: int = 12345
    embedder: str | None = None
    taxonomy: str | None = None
    contexts: str | None = None
    memalign_backend: str | None = None  # E4/E5: native (default) or mlflow


def open_env(opts: RunOptions, taxonomy: Any, contexts: dict[str, Any], prompts: dict[str, Any],
             model_spec: str) -> Env:
    model = get_model(model_spec)
    cache = CompletionCache(Path(opts.cache_path) if opts.cache_path else None) if opts.use_cache else None
    runner = Runner(RunnerConfig(concurrency=opts.concurrency, use_cache=opts.use_cache,
                                 progress=opts.progress), cache=cache)
    ledger = Ledger(runner, opts.budget_usd)
    return Env(model, ledger, taxonomy, contexts, prompts, opts.embedder, opts.seed,
               opts.memalign_backend or "native")


def close_env(env: Env) -> None:
    with contextlib.suppress(Exception):  # best effort; must not mask results
        asyncio.run(env.model.aclose())


def manifest(run_dir: Path, kind: str, config: dict[str, Any], models: list[str], dataset: dict[str, Any],
             seeds: dict[str, int], status: str, extra: dict[str, Any] | None = None) -> None:
    write_manifest(run_dir, suite=SUITE, config=config, models=models, seeds=seeds, dataset=dataset,
                   extra={"kind": kind, "status": status, **(extra or {})})


def write_calls(run_dir: Path, env: Env | None) -> None:
    write_jsonl(run_dir / "calls.jsonl", env.ledger.rows if env is not None else [])
