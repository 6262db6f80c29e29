"""The run flags every model-calling command shares, declared once: ``RunOptions`` and its one builder.

Each command used to declare ``--budget``, ``--cache``, ``--concurrency`` ... on its own,
and they drifted: one command had no ``--concurrency``, another called the budget
field by another name. A command now takes them all from one decorator, as Inspect's
``@common_options`` does, and is handed the built :class:`RunOptions` in their place::

    @app.command()
    @run_flags()
    def run(data: ..., options: RunOptions = RUN_FLAGS) -> None:
        cfg = RunConfig(data=data, options=options)

The flags stand in ``--help`` where ``options`` stands in the signature. A command that
calls no model declares only what it uses (``@run_flags(only=("out",), no_cache=True)``);
:func:`run_options` builds ``RunOptions`` for everything else (tests, the demo).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from carebench.cli_params import Slot, expand


@dataclass
class RunOptions:
    """The command-line knobs every suite's run shares (built from the flags by
    :func:`run_options`; suite configs hold one as ``options``)."""

    budget_usd: float | None = None
    use_cache: bool = True
    cache_path: str | Path | None = None
    concurrency: int | None = None
    progress: bool = True
    timeout_s: float = 120.0
    #: a dry run: models are built without credentials and nothing is called
    dry_run: bool = False
    #: the run directory to write (None: ``runs/<suite>-<time>``)
    out: Path | None = None
    #: model spec -> carebench.models.options.RequestOptions (reasoning models, extra fields)
    model_options: dict[str, Any] = field(default_factory=dict)
    #: retries of a transiently failed call (None: the runner's default)
    max_retries: int | None = None
    #: batch mode (carebench.batch.options.BatchOptions, from ``--batch DIR``): calls the cache
    #: cannot answer are written to DIR as batch request files instead of being sent
    batch: Any = None


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


#: every shared run flag (its parameter name) with its declaration and default, in ``--help`` order
FLAGS: dict[str, tuple[Any, Any]] = {
    "out": (Out, None), "cache": (Cache, None), "no_cache": (NoCache, False), "budget": (Budget, None),
    "dry_run": (DryRun, False), "json_out": (Json, False), "concurrency": (Concurrency, None),
    "model_option": (ModelOption, None), "timeout": (Timeout, DEFAULT_TIMEOUT_S), "batch": (Batch, None),
    "batch_format": (BatchFormat, None),
}


#: the parameter given this default receives the built :class:`RunOptions`
RUN_FLAGS: Any = Slot("RUN_FLAGS")
#: the parameter given this default receives the flags' values as given (e.g. to merge a config file under them)
RUN_FLAG_VALUES: Any = Slot("RUN_FLAG_VALUES")


def run_flags(*, only: Iterable[str] | None = None, without: Iterable[str] = (),
              declare: Mapping[str, Any] | None = None, **fixed: Any) -> Callable[[Callable], Callable]:
    """Give a Typer command the shared run flags in place of its ``RUN_FLAGS`` parameter.

    ``only``/``without`` choose a subset of :data:`FLAGS` (by parameter name); ``declare``
    replaces a flag's declaration (its help) for a command whose flag means less, e.g. a
    ``--budget`` accepted where no model is called; ``fixed`` are :func:`run_options`
    arguments the command sets itself (``no_cache=True``, ``progress=False``)."""
    unknown = sorted((set(only or ()) | set(without) | set(declare or ())) - set(FLAGS))
    if unknown:
        raise TypeError(f"run_flags: unknown run flags {unknown}")
    flags = {n: ((declare or {}).get(n, annotation), default) for n, (annotation, default) in FLAGS.items()
             if (only is None or n in only) and n not in set(without)}

    def given(values: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in values.items() if k != "json_out"}  # --json is read through JSON_OUTPUT

    return functools.partial(expand, options=flags, build={
        RUN_FLAGS: lambda values: run_options(**fixed, **given(values)), RUN_FLAG_VALUES: given})
