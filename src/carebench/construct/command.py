"""One construct command (``build`` or a single stage) on the run skeleton.

:class:`ConstructCommand` is the command's suite object for
:func:`carebench.engine.skeleton.run_suite`, the skeleton every suite runs through:
``execute`` runs the command's body through the run, ``plan`` walks the same body
against a :class:`~carebench.construct.plan.PlanningRun` (``--dry-run``), and the
scoring and report are :class:`~carebench.construct.suite.ConstructSuite`'s, the same
code as ``carebench report DIR``. The body names its output files (:meth:`Stages.output`);
they are written with the run directory, only when every step finished.

A budget stop (:class:`~carebench.construct.calls.StageStopped`) keeps the counts of
the steps that finished, marks the step it cut short ``incomplete``, writes no output
rows and ends with the run's one-line stop message (exit code 3); re-running the same
command resumes from the cache, repeating no completed call. Bad input that ends the
body (e.g. residual identifiers) writes the run as ``stopped`` (its report lists why)
and then stops the command (exit code 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.construct.calls import StageStopped
from carebench.construct.io import write_models
from carebench.construct.plan import PlanningRun
from carebench.construct.suite import ConstructSuite
from carebench.engine.options import RunOptions, run_options
from carebench.engine.run import Run
from carebench.engine.skeleton import Execution, Plan, run_suite
from carebench.types import CarebenchError


@dataclass
class ConstructOptions:
    """What every construct command takes from the command line."""

    model: str | None = None
    embedding_cache: str | None = None
    #: the shared run flags (--out, --cache, --budget, ...)
    options: RunOptions = field(default_factory=run_options)

    def run_options(self, *, calls: bool = True) -> RunOptions:
        """The run's options; a command that makes no model call opens no cache."""
        if not calls:
            return run_options(out=self.options.out, no_cache=True, progress=False)
        return self.options


@dataclass
class Stages:
    """Counts in and out per step, the run's records (see :mod:`carebench.construct.suite`),
    the step under way (the one a budget stop marks incomplete) and the output files."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    current: str | None = None
    outputs: list[tuple[str, Any, Callable[[Path, Any], None]]] = field(default_factory=list)

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

    def output(self, name: str, data: Any, write: Callable[[Path, Any], None] = write_models) -> None:
        """An output file of the command (``write(path, data)``, rows by default), written
        into the run directory once every step finished; a dry run writes none."""
        self.outputs.append((name, data, write))

    def write_outputs(self, run_dir: Path) -> None:
        for name, data, write in self.outputs:
            write(run_dir / name, data)


Body = Callable[[Run, Stages], None]


class ConstructCommand(ConstructSuite):
    """One construct command as a suite: ``body(run, stages)`` does its work, adding step
    counts and records to ``stages`` and naming its output files."""

    def __init__(self, kind: str, config: dict[str, Any], dataset: dict[str, Any], body: Body, *,
                 check: Callable[[Run], Any] | None = None, manifest_extra: dict[str, Any] | None = None):
        """``check(run)``: what must hold before any call and before the run directory exists
        (the build's model specs); ``manifest_extra``: more manifest keys."""
        self.kind, self.config, self.dataset, self.body = kind, config, dataset, body
        self.check, self.manifest_extra = check, manifest_extra or {}

    def plan(self, run: Run) -> Plan:
        """The body against a planning run (its output files are never written), as the shared plan."""
        if self.check is not None:
            self.check(run)
        planner = PlanningRun(run)
        self.body(planner, Stages(current=self.kind))  # type: ignore[arg-type]
        return planner.plan(self.name, [f"command: construct {self.kind}"])

    def execute(self, run: Run) -> Execution:
        if self.check is not None:
            self.check(run)
        stages = Stages(current=self.kind)
        ex = Execution(records=stages.records, config=self.config, dataset=self.dataset,
                       seeds={"construct": self.config.get("seed", 42)},
                       extra={"kind": self.kind, **self.manifest_extra, "stages": stages.rows})
        try:
            self.body(run, stages)
        except StageStopped as stop:
            # later prompts depend on answers not yet known: the calls left are a lower bound
            run.mark_incomplete(stages.current or self.kind, open_ended=True)
            ex.extra["stopped_batch"] = stop.batch  # incomplete: the finished steps, no output rows
        except CarebenchError as e:
            ex.status, ex.error = "stopped", e  # bad input (e.g. residual identifiers): the report lists them
        else:
            ex.failed_calls = run.failed_calls  # harness failures: left out, counted, retried by a re-run
            ex.artifacts = stages.write_outputs
        ex.models = sorted(run.model_specs())
        return ex


def run_command(command: ConstructCommand, opts: ConstructOptions, *, calls: bool = True) -> Path | Plan:
    """Run (or plan) a construct command through the run skeleton; ``calls`` False: it
    makes no model call (no cache opened)."""
    return run_suite(command, opts.run_options(calls=calls), dry_run=opts.options.dry_run)
