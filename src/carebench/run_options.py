"""The run flags every model-calling command shares, and the one builder of ``RunOptions``.

Each command used to declare ``--budget``, ``--cache``, ``--concurrency`` ... on its own,
and they drifted: one command had no ``--concurrency``, another called the budget
field by another name. A command now declares these aliases as its parameters and
hands them to :func:`run_options`; suite configs hold the result as ``run``.

Usage in a Typer command::

    def run(..., out: Out = None, cache: Cache = None, no_cache: NoCache = False,
            budget: Budget = None, dry_run: DryRun = False, concurrency: Concurrency = None,
            model_option: ModelOption = None, timeout: Timeout = 120.0,
            batch: Batch = None, batch_format: BatchFormat = None):
        opts = run_options(out=out, cache=cache, no_cache=no_cache, budget=budget,
                           dry_run=dry_run, concurrency=concurrency,
                           model_option=model_option, timeout=timeout,
                           batch=batch, batch_format=batch_format)
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

import typer

from carebench.run import RunOptions

Out = Annotated[Path | None, typer.Option(
    "--out", show_default="runs/<suite>-<time>", help="Run directory to write.")]
Cache = Annotated[Path | None, typer.Option(
    "--cache", show_default="CAREBENCH_CACHE, else the user cache directory", help="Cache file.")]
NoCache = Annotated[bool, typer.Option(
    "--no-cache", help="Neither read nor write the cache (a re-run pays for every call again).")]
Budget = Annotated[float | None, typer.Option(
    "--budget", show_default="no cap", help="USD cap for the whole command: no call starts whose worst case would pass "
                     "it; a stopped run exits 3 and resumes from the cache.")]
DryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Print the call plan and its estimated cost; call nothing.")]
#: the running command's ``--json`` (set while its flags are parsed; read by ``echo_plan``)
JSON_OUTPUT: ContextVar[bool] = ContextVar("carebench_json_output", default=False)


def _json_output(value: bool) -> bool:
    JSON_OUTPUT.set(bool(value))
    return value


Json = Annotated[bool, typer.Option(
    "--json", callback=_json_output,
    help="With --dry-run: print the whole plan as JSON instead of the summary.")]
Concurrency = Annotated[int | None, typer.Option(
    "--concurrency", min=1, show_default="the provider's", help="Concurrent calls per model.")]
ModelOption = Annotated[list[str] | None, typer.Option(
    "--model-option", show_default="none", help="Per-model request option SPEC:key=value, repeatable: reasoning=true, "
    "reasoning_effort=low, max_tokens=N, token_param=max_completion_tokens, temperature=omit, "
    "logprobs=false, output=json_object (structured output mode, not probed), extra.FIELD=value.")]
Timeout = Annotated[float, typer.Option(
    "--timeout", min=0.001, help="Seconds one try of a call may take before it is retried.")]

Batch = Annotated[Path | None, typer.Option(
    "--batch", show_default="CAREBENCH_BATCH_DIR, else off: calls are sent", help="Batch mode: write the calls the cache cannot answer to this directory as "
                    "provider batch request files instead of sending them; exits 4 while any wait "
                    "(carebench batch submit/fetch/import, then re-run; see docs/batch.md).")]
BatchFormat = Annotated[str | None, typer.Option(
    "--batch-format", show_default="CAREBENCH_BATCH_FORMAT, else openai", help="Request files for OpenAI-compatible models: openai (the Batch API) or "
                           "vllm (vllm run-batch input, for openai:MODEL@URL models); Anthropic "
                           "models always get Message Batches requests.")]

#: the defaults the aliases above are declared with, for commands built without Typer
DEFAULT_TIMEOUT_S = 120.0


def run_options(*, out: str | Path | None = None, cache: str | Path | None = None,
                no_cache: bool = False, budget: float | None = None, dry_run: bool = False,
                concurrency: int | None = None, model_option: list[str] | None = None,
                timeout: float = DEFAULT_TIMEOUT_S, progress: bool = True,
                model_options: dict[str, Any] | None = None, retries: int | None = None,
                batch: str | Path | None = None, batch_format: str | None = None) -> RunOptions:
    """The one builder of :class:`RunOptions` from the shared flags.

    ``model_option`` holds raw ``--model-option`` texts; ``model_options`` a config file's
    ``{spec: {key: value}}`` table, which the flags override key by key. Both are
    validated here, before any call. ``retries``: a command's own retry setting (e.g.
    ``support run --retries``); ``progress`` False keeps a command (or a test) quiet.
    ``batch``/``batch_format``: batch mode (``--batch DIR``, docs/batch.md)."""
    from carebench.batch.options import batch_options
    from carebench.models.options import collect_model_options

    return RunOptions(batch=batch_options(batch, batch_format),
        out=Path(out) if out is not None else None,
        cache_path=Path(cache) if cache is not None else None,
        use_cache=not no_cache, budget_usd=budget, dry_run=dry_run, concurrency=concurrency,
        timeout_s=timeout, progress=progress,
        model_options=collect_model_options(model_option, model_options), max_retries=retries,
    )
