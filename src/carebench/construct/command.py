"""One construct command = one :class:`carebench.run.Run` + one run directory.

Every construct command (``build`` and each single stage) goes through
:func:`run_command`: the run owns the runner, cache, budget, ``calls.jsonl`` rows,
models and progress; this module writes the manifest (``running``, then
``complete`` or ``stopped``), ``metrics.json`` and the report.

A budget stop (:class:`~carebench.construct.calls.StageStopped`) keeps the counts of
the steps that finished, marks the step it cut short ``incomplete`` (manifest,
metrics and report), writes no output rows and ends with the run's one-line stop
message (exit code 3). Re-running the same command resumes from the cache: no
completed call is repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.construct.calls import StageStopped
from carebench.run import Run, RunOptions
from carebench.rundir import new_run_dir, write_json, write_jsonl, write_manifest
from carebench.types import CarebenchError

SUITE = "construct"


@dataclass
class ConstructOptions:
    """What every construct command takes from the command line."""

    out: str | None = None
    model: str | None = None
    budget_usd: float | None = None
    dry_run: bool = False
    use_cache: bool = True
    cache_path: str | None = None
    concurrency: int | None = None
    progress: bool = True
    embedding_cache: str | None = None

    def run_options(self, *, calls: bool = True, planning: bool = False) -> RunOptions:
        """The run's options; a command that makes no model call opens no cache."""
        if not calls:
            return RunOptions(use_cache=False, progress=False)
        return RunOptions(budget_usd=self.budget_usd, use_cache=self.use_cache, cache_path=self.cache_path,
                          concurrency=self.concurrency, progress=self.progress, planning=planning)


@dataclass
class Stages:
    """Counts in and out per step, for the report, and the step under way (the one a
    budget stop marks incomplete)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    current: str | None = None

    def begin(self, step: str) -> None:
        self.current = step

    def add(self, step: str, n_in: int, n_out: int, note: str = "", **detail: Any) -> None:
        self.rows.append({"step": step, "in": n_in, "out": n_out, "note": note})
        if detail:
            self.details[step] = detail
        self.current = None


Body = Callable[[Run, Stages, Path], dict[str, Any]]


def run_command(
    kind: str,
    opts: ConstructOptions,
    config: dict[str, Any],
    dataset: dict[str, Any],
    body: Body,
    *,
    calls: bool = True,
    run: Run | None = None,
    manifest_extra: dict[str, Any] | None = None,
    render: Callable[[Path], None] | None = None,
) -> Path:
    """Create the run directory, run ``body(run, stages, run_dir)`` (it writes its output
    rows and returns extra metrics), then write calls, metrics, manifest and report.

    ``run``: a run the caller already opened (e.g. to check model specs before the
    directory exists); it is closed here either way."""
    run = run or Run(opts.run_options(calls=calls))
    with run:
        run_dir = new_run_dir(SUITE, opts.out)
        stages = Stages(current=kind)

        def manifest(status: str) -> None:
            write_manifest(run_dir, suite=SUITE, config=config, models=sorted(run.model_specs()),
                           seeds={"construct": config.get("seed", 42)}, dataset=dataset,
                           extra={"status": status, "kind": kind, **(manifest_extra or {}),
                                  "incomplete": sorted(run.incomplete),
                                  "accounting": run.accounting() if calls else {},
                                  "output_modes": run.output_modes(), "stages": stages.rows})

        manifest("running")
        try:
            extra = body(run, stages, run_dir)
        except StageStopped as stop:
            # later prompts depend on answers not yet known: the calls left are a lower bound
            run.mark_incomplete(stages.current or kind, open_ended=True)
            write_stopped(run_dir, stages, run if calls else None, stopped_batch=stop.batch)
            manifest("stopped")
            run.finish()  # the run's one-line stop message, exit code 3
            raise  # pragma: no cover - finish() raises once the budget stopped the run
        except CarebenchError:
            write_stopped(run_dir, stages, run if calls else None)
            manifest("stopped")
            raise
        if calls:
            write_jsonl(run_dir / "calls.jsonl", run.call_rows)
        metrics = {"stages": stages.rows, "details": stages.details, **extra}
        if calls:
            metrics["accounting"] = run.accounting()
        write_json(run_dir / "metrics.json", metrics)
        manifest("complete")
    if render is None:
        from carebench.construct.report import render_stage as render
    render(run_dir)
    return run_dir


def write_stopped(run_dir: Path, stages: Stages, run: Run | None, stopped_batch: str | None = None) -> None:
    """What a stopped run leaves: its calls, the counts of the steps that finished and a
    report of them (residual hits included), never an output rows file."""
    if run is not None:
        write_jsonl(run_dir / "calls.jsonl", run.call_rows)
    metrics: dict[str, Any] = {"stages": stages.rows, "details": stages.details, "status": "stopped",
                               "anonymization": stages.details.get("anonymize")}
    if run is not None:
        metrics["incomplete"] = sorted(run.incomplete)
        if stopped_batch is not None:
            metrics["stopped_batch"] = stopped_batch
        metrics["accounting"] = run.accounting()
    write_json(run_dir / "metrics.json", metrics)
    from carebench.construct.report import render_stage

    render_stage(run_dir)
