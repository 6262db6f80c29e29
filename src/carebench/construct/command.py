"""One construct command = one :class:`carebench.engine.run.Run` + one run directory.

Every construct command (``build`` and each single stage) goes through
:func:`run_construct_command`: the run owns the runner, cache, budget, ``calls.jsonl`` rows,
models and progress; this module writes ``records.jsonl`` and the manifest
(``running``, then ``complete`` or ``incomplete`` through
:func:`carebench.engine.skeleton.write_run`; ``stopped`` when bad input ended it), then ``metrics.json`` and the
report through :func:`carebench.engine.skeleton.rerender`, the same code as
``carebench report DIR``, so a re-render reproduces them byte for byte.

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
from carebench.construct.suite import ConstructSuite
from carebench.engine.options import run_options
from carebench.engine.run import Run, RunOptions
from carebench.engine.rundir import new_run_dir, write_manifest
from carebench.engine.skeleton import Execution, Plan, rerender, write_run
from carebench.types import CarebenchError

SUITE = "construct"


@dataclass
class ConstructOptions:
    """What every construct command takes from the command line."""

    model: str | None = None
    embedding_cache: str | None = None
    #: the shared run flags (--out, --cache, --budget, ...)
    options: RunOptions = field(default_factory=run_options)

    @property
    def dry_run(self) -> bool:
        return self.options.dry_run

    def run_options(self, *, calls: bool = True) -> RunOptions:
        """The run's options; a command that makes no model call opens no cache."""
        if not calls:
            return run_options(out=self.options.out, no_cache=True, progress=False)
        return self.options


@dataclass
class Stages:
    """Counts in and out per step, the run's records (see :mod:`carebench.construct.suite`)
    and the step under way (the one a budget stop marks incomplete)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    current: str | None = None

    def begin(self, step: str) -> None:
        self.current = step

    def add(self, step: str, n_in: int, n_out: int, note: str = "", **detail: Any) -> None:
        row = {"step": step, "in": n_in, "out": n_out, "note": note}
        self.rows.append(row)
        self.records.append({"kind": "step", **row, **({"detail": detail} if detail else {})})
        self.current = None

    def record(self, kind: str, **fields: Any) -> None:
        """A record ``metrics.json`` is scored from (e.g. ``selection`` outcomes)."""
        self.records.append({"kind": kind, **fields})


Body = Callable[[Run, Stages, Path], None]


def run_construct_command(
    kind: str,
    opts: ConstructOptions,
    config: dict[str, Any],
    dataset: dict[str, Any],
    body: Body,
    *,
    calls: bool = True,
    run: Run | None = None,
    manifest_extra: dict[str, Any] | None = None,
) -> Path | Plan:
    """Create the run directory, run ``body(run, stages, run_dir)`` (it writes its output
    rows and adds records), then write calls, records and the manifest through
    :func:`carebench.engine.skeleton.write_run`, and score and render them exactly as
    ``carebench report DIR`` does.

    ``run``: a run the caller already opened (e.g. to check model specs before the
    directory exists); it is closed here either way. With ``opts.dry_run`` nothing is
    written: the body runs against a :class:`~carebench.construct.plan.PlanningRun`
    and the plan comes back."""
    run = run or Run(opts.run_options(calls=calls))
    if opts.dry_run:
        return plan_command(kind, opts, body, run)
    with run:
        run_dir = new_run_dir(SUITE, opts.options.out)
        stages = Stages(current=kind)
        seeds = {"construct": config.get("seed", 42)}

        def manifest(status: str) -> None:  # the placeholder while the body runs
            write_manifest(run_dir, suite=SUITE, config=config, models=sorted(run.model_specs()),
                           seeds=seeds, dataset=dataset,
                           extra={"status": status, "kind": kind, **(manifest_extra or {}),
                                  "stages": stages.rows})

        def finish(status: str | None = None, **extra: Any) -> None:
            """Calls, records and the manifest through the core writer, then the report.
            ``status`` None: the core's (``incomplete`` after a budget stop or failed calls)."""
            ex = Execution(records=stages.records, config=config, dataset=dataset, seeds=seeds,
                           models=sorted(run.model_specs()), status=status,
                           failed_calls=int(extra.pop("failed_calls", 0)),
                           extra={"kind": kind, **(manifest_extra or {}), "stages": stages.rows, **extra})
            write_run(run_dir, SUITE, ex, run)
            rerender(run_dir, ConstructSuite())

        manifest("running")
        try:
            body(run, stages, run_dir)
        except StageStopped as stop:
            # later prompts depend on answers not yet known: the calls left are a lower bound
            run.mark_incomplete(stages.current or kind, open_ended=True)
            finish(stopped_batch=stop.batch)  # incomplete: the finished steps, no output rows
            run.finish()  # the run's one-line stop message, exit code 3
            raise  # pragma: no cover - finish() raises once the budget stopped the run
        except CarebenchError:
            finish("stopped")  # bad input (e.g. residual identifiers): the report lists them
            raise
        finish(failed_calls=run.failed_calls)  # harness failures: left out, counted, retried by a re-run
    return run_dir


def plan_command(kind: str, opts: ConstructOptions, body: Body, run: Run) -> Plan:
    """A dry run: the command's body against a planning run, in a scratch directory (its
    output rows are thrown away), as the shared plan."""
    import tempfile

    from carebench.construct.plan import PlanningRun

    planner = PlanningRun(run)
    with run, tempfile.TemporaryDirectory(prefix="carebench-plan-") as scratch:
        body(planner, Stages(current=kind), Path(scratch))  # type: ignore[arg-type]
    return planner.plan(SUITE, [f"command: construct {kind}"])
