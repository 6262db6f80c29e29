"""The run skeleton every suite plugs into: plan -> execute -> records -> score -> render.

A suite is a small object (:class:`Suite`): ``plan`` lists its calls for a dry run,
``execute`` makes them through the run context and returns records, ``score`` turns
records into ``metrics.json`` and ``render`` turns metrics and records into a
:class:`~carebench.report.Report` without touching files. Everything else is
generic and lives here: the run directory, the dry-run plan, the budget stop and
resume (the run context and its cache), and ``carebench report DIR``, which
re-scores and re-renders from the records alone. Suites used to wire this up
each on their own (six runner set-ups, three re-renderers); now there is one.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from carebench.engine.options import JSON_OUTPUT, RunOptions
from carebench.engine.run import Run
from carebench.engine.rundir import (
    new_run_dir,
    read_json,
    read_jsonl,
    refuse_other_kind,
    run_dir_path,
    scrub,
    write_json,
    write_jsonl,
    write_manifest,
)
from carebench.engine.runner import Call, CallPlan
from carebench.models.pricing import unpriced_note
from carebench.report import Callout, Headline, KeyValue, Report, Section, write_report
from carebench.report.banners import banner_kinds, banner_texts, manifest_bytes
from carebench.report.figure_reuse import reusing_figures
from carebench.report.headline import no_headline
from carebench.types import CarebenchError
from carebench.wording import count


@dataclass
class Execution:
    """What ``Suite.execute`` returns: the records and what the manifest must say."""

    records: list[dict[str, Any]]
    config: dict[str, Any]
    dataset: dict[str, Any]
    seeds: dict[str, int]
    models: list[str] | None = None  # default: every model the run used
    extra: dict[str, Any] = field(default_factory=dict)  # suite-specific manifest keys
    files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # more JSONL files
    #: calls that failed after every retry (harness failures): what they fed is left out of
    #: the scores and counted by the suite; the run is marked incomplete (a re-run retries them)
    failed_calls: int = 0
    #: record fields stored as columns of records.parquet (none: no Parquet copy)
    parquet_columns: tuple[str, ...] = ()
    #: writes what the command makes beyond JSONL (e.g. frozen profile files, a dataset
    #: release), given the run directory, before the manifest (so a crash leaves no manifest)
    artifacts: Callable[[Path], None] | None = None
    #: the manifest's status when the suite decides it (e.g. construct's ``stopped`` when bad
    #: input ended the command); None: ``incomplete`` after a budget stop or failed calls, else
    #: ``complete``
    status: str | None = None
    #: bad input that ended the work after what finished was recorded (e.g. construct's residual
    #: identifiers): the run is written and rendered (``status`` says why), then this is raised
    error: Exception | None = None


@dataclass
class PlanStage:
    """One stage of a dry-run plan (e.g. one method, or generation / judging)."""

    name: str
    plan: CallPlan
    exact: bool = True  # False: some requests depend on replies not yet made (estimated)
    #: True: even how many calls depends on replies not yet made; the plan gives the most
    upper_bound: bool = False


@dataclass
class Plan:
    """The dry-run answer, the same shape for every suite: calls and the whole run's cost."""

    suite: str
    stages: list[PlanStage]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        by_model: dict[str, dict[str, Any]] = {}
        for s in self.stages:
            for spec, row in s.plan.by_model.items():
                m = by_model.setdefault(spec, {"calls": 0, "cached": 0, "estimated_cost_usd": 0.0,
                                               "reply_lengths": set()})
                m["calls"] += int(row["calls"])
                m["cached"] += int(row["cached"])
                m["estimated_cost_usd"] += float(row["estimated_cost_usd"])
                m["reply_lengths"].add(row.get("reply_lengths", "output caps"))
                if row.get("priced") is False:
                    m["priced"] = False
        for m in by_model.values():
            m["reply_lengths"] = " and ".join(sorted(m["reply_lengths"]))
            if m.get("priced") is False:
                m["estimated_cost_usd"] = None  # unpriced: no number, never $0
        return {
            "suite": self.suite,
            "calls": sum(s.plan.total for s in self.stages),
            "cached": sum(s.plan.cached for s in self.stages),
            "to_make": sum(s.plan.to_make for s in self.stages),
            "estimated_cost_usd": round(sum(s.plan.estimated_cost_usd for s in self.stages), 6),
            "upper_bound": any(s.upper_bound for s in self.stages),
            "stages": [{"name": s.name, "calls": s.plan.total, "cached": s.plan.cached,
                        "to_make": s.plan.to_make,
                        "estimated_cost_usd": round(s.plan.estimated_cost_usd, 6),
                        "exact": s.exact, "upper_bound": s.upper_bound} for s in self.stages],
            "by_model": {k: {**v, "estimated_cost_usd": None if v["estimated_cost_usd"] is None
                             else round(v["estimated_cost_usd"], 6)}
                         for k, v in by_model.items()},
            "unpriced": sorted(k for k, v in by_model.items() if v.get("priced") is False),
            "reply_lengths": "estimated from cached replies of the same model where there are "
                             "any, else the request's output cap (the worst case)",
            "notes": list(self.notes) + ([unpriced_note(sorted(
                k for k, v in by_model.items() if v.get("priced") is False))
                + "; estimated_cost_usd covers the priced models only"]
                if any(v.get("priced") is False for v in by_model.values()) else []),
        }


def plan_summary(plan: dict[str, Any]) -> str:
    """A dry-run plan (:meth:`Plan.to_dict`) in a few human lines: calls, how many the
    cache answers, the estimated cost, or which models have no price (never "$0")."""
    at_most = "at most " if plan.get("upper_bound") else ""
    lines = [(f"dry run ({plan['suite']}): {at_most}{count(plan['calls'], 'call')}, "
              f"{plan['cached']} answered by the cache, {at_most}{plan['to_make']} to make")]
    unpriced = list(plan.get("unpriced") or [])
    priced = [m for m in plan.get("by_model") or {} if m not in unpriced]
    if not plan["to_make"]:
        cost = "nothing to pay: every call is in the cache"
    elif unpriced and not priced:
        cost = "cost unknown (unpriced: " + ", ".join(unpriced) + ")"
    else:
        cost = f"estimated cost {at_most}${plan['estimated_cost_usd']:.4f}"
        if unpriced:
            cost += " for the priced models; unpriced: " + ", ".join(unpriced)
    lines.append(cost)
    width = max((len(s["name"]) for s in plan["stages"]), default=0)
    for s in plan["stages"]:
        est = "" if s["exact"] else " (estimated)"
        bound = "at most " if s.get("upper_bound") else ""
        lines.append(f"  {s['name']:<{width}}  {bound}{s['calls']} calls, {s['cached']} cached, "
                     f"{s['to_make']} to make{est}")
    if unpriced:
        lines.append("add prices with CAREBENCH_PRICES=/path/prices.toml to see their cost")
    lines.append("the whole plan as JSON: add --json")
    return "\n".join(lines)


def echo_plan(plan: Plan, as_json: bool | None = None) -> None:
    """Print a dry-run plan: a short summary, or the JSON (the same shape for every
    suite) with ``--json``. ``as_json=None`` follows the running command's ``--json``
    flag (:data:`carebench.engine.options.Json`), so a command only declares it."""
    import typer

    if as_json is None:
        as_json = JSON_OUTPUT.get()
    data = plan.to_dict()
    typer.echo(json.dumps(data, indent=2) if as_json else plan_summary(data))


def stage(run: Run, name: str, calls: Sequence[Call], exact: bool = True) -> PlanStage:
    return PlanStage(name, run.plan(calls), exact)


class Suite(Protocol):
    """What a suite provides; registered in the CLI's suite table."""

    name: str

    def plan(self, run: Run) -> Plan: ...

    def execute(self, run: Run) -> Execution: ...

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> Any:
        """The run directory's records in whatever form ``score`` and ``render`` take."""
        ...

    def score(self, records: Any, manifest: Mapping[str, Any]) -> dict[str, Any]: ...

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        """Pure: no file I/O."""
        ...

    # optional: ``headline(metrics, records, manifest) -> Headline``, the report's answer-first
    # box (see :func:`headline_of`); a suite without it gets a box saying it has no single measure
    # optional: ``outline(run_dir)``, called once the run directory is complete, writes what its
    # comparer reads short of the per-unit data (:mod:`carebench.compare.outline`), so a
    # leaderboard over many runs reads in full only the runs whose systems it keeps
    # optional: ``holds``, names of run directories the command writes inside this run's own
    # before running it (converse calibrate's judging run): they do not make it "not a run directory"


def headline_of(suite: Any, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Headline:
    """The report's headline box from the suite's own ``headline`` hook (each suite reads its
    own metrics), else a box saying the run kind has no single headline measure."""
    if metrics.get("status") == "incomplete" and "incomplete" in metrics and "finished" in metrics:
        parts = ", ".join(map(str, metrics.get("incomplete") or [])) or "the run"
        return Headline(f"No result: the run stopped before anything could be scored ({parts} incomplete)")
    hook = getattr(suite, "headline", None)
    if hook is None:
        kind = manifest.get("kind")
        return no_headline(f"this {manifest.get('suite', 'run')}{' ' + str(kind) if kind else ''} run's results "
                           "are in the sections below")
    return hook(metrics, records, manifest)


def run_suite(suite: Suite, options: RunOptions, *, out: str | Path | None = None,
              dry_run: bool | None = None, cache: Any = None) -> Path | Plan:
    """Run a suite end to end (or plan it: ``options.dry_run``); raises ``RunStopped``
    after writing what finished if the budget stopped the run, and the execution's
    ``error`` after writing the run it ended. The run directory is
    ``options.out``; ``out`` overrides it (a command whose default differs, e.g.
    ``runs/plural-freeze-<time>``), and so does ``dry_run``."""
    out = out if out is not None else options.out
    dry_run = options.dry_run if dry_run is None else dry_run
    run = Run(options, cache=cache)
    with run:
        if dry_run:
            return suite.plan(run)
        holds = getattr(suite, "holds", ())
        run_dir = run_dir_path(suite.name, out, holds, suite.name)  # checked now, created once there are results
        ex = suite.execute(run)
    refuse_other_kind(run_dir, ex.extra.get("kind"))  # before anything is written
    if ex.error is not None:  # the run directory says why it stopped, as the console did
        ex.extra.setdefault("error", " ".join(str(ex.error).split()))
    run_dir = new_run_dir(suite.name, run_dir, holds, suite.name)
    write_run(run_dir, suite.name, ex, run)
    rerender(run_dir, suite)
    if ex.error is not None:
        raise ex.error
    outline = getattr(suite, "outline", None)
    if outline is not None:
        outline(run_dir)
    run.finish()
    return run_dir


def write_run(run_dir: Path, suite: str, ex: Execution, run: Run) -> dict[str, Any]:
    """records.jsonl, calls.jsonl (replayable), extra files and the manifest, each atomically."""
    for name, rows in ex.files.items():
        write_jsonl(run_dir / name, rows)
    write_jsonl(run_dir / "calls.jsonl", run.call_rows)
    write_records(run_dir, ex.records, ex.parquet_columns)
    if ex.artifacts is not None:
        ex.artifacts(run_dir)
    return write_manifest(
        run_dir, suite=suite, config=ex.config,
        models=ex.models if ex.models is not None else run.model_specs(),
        seeds=ex.seeds, dataset=ex.dataset,
        # how each model's structured requests were constrained (decided once per run and model
        # by its capability probe), for every suite; a suite may say more under the same key
        extra={"output_modes": run.output_modes(), **ex.extra,
               "status": ex.status or ("incomplete" if run.incomplete or ex.failed_calls else "complete"),
               "failed_calls": ex.failed_calls,
               "incomplete": sorted(run.incomplete), "accounting": run.accounting()},
    )


def failed_calls_message(run_dir: str | Path) -> str | None:
    """One line for a run whose calls failed after every retry (harness failures: what
    they fed is left out of the scores), or None; the CLI prints it and exits 1."""
    m = read_json(Path(run_dir) / "manifest.json")
    n = int(m.get("failed_calls") or 0)
    if not n:
        return None
    by = {k: v for k, v in (m.get("harness_failures") or {}).items() if v}
    parts = f" ({', '.join(f'{k}: {v}' for k, v in by.items())})" if by else ""
    return (f"run incomplete: {n} call{'s' * (n != 1)} failed after every retry{parts} (the server "
            f"or the connection failed, not the model); what they fed is not scored and is counted. "
            f"Re-run the same command to retry them")


def write_records(run_dir: Path, rows: Sequence[dict[str, Any]], parquet_columns: Sequence[str] = ()) -> None:
    """``records.jsonl`` (the readable record) and, given columns, ``records.parquet``
    (the same rows, secrets scrubbed and JSON-encoded once for both)."""
    from carebench.fileio import atomic_write_text
    from carebench.jsonclean import json_default

    rows = [scrub(r) for r in rows]
    lines = [json.dumps(r, ensure_ascii=False, default=json_default) for r in rows]
    atomic_write_text(run_dir / "records.jsonl", "".join(x + "\n" for x in lines))
    if parquet_columns:
        from carebench.records_parquet import write_records_parquet

        write_records_parquet(run_dir, rows, lines, parquet_columns)


def read_records(run_dir: str | Path) -> list[dict[str, Any]]:
    """A run directory's records as dicts (``records.jsonl``)."""
    return read_jsonl(Path(run_dir) / "records.jsonl")


def single_threaded_blas() -> Any:
    """Score with one BLAS thread: a multi-threaded matrix product sums in an order
    that depends on the thread count, so the bootstrap intervals in ``metrics.json``
    changed in their last digits between a 1-core and a 2-core machine. One thread
    makes the figures independent of the core count (they may still differ in the
    last digit between CPU kernel families)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def rerender(run_dir: str | Path, suite: Suite, *, out_dir: str | Path | None = None,
             manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``metrics.json`` and the report from the records alone (``carebench report DIR``).
    ``manifest`` may override the recorded one (e.g. re-scoring with another panel)."""
    run_dir = Path(run_dir)
    manifest = manifest if manifest is not None else read_json(run_dir / "manifest.json")
    with cycle_collector_paused():
        records = suite.read_records(run_dir, manifest)
        with single_threaded_blas():
            metrics = suite.score(records, manifest)
        target = Path(out_dir) if out_dir is not None else run_dir
        if target.resolve() != run_dir.resolve() and (target / "manifest.json").exists():
            raise CarebenchError(f"--out {target} is another run's directory: a re-score is written to a folder "
                                 "of its own (or in place, without --out)")
        target.mkdir(parents=True, exist_ok=True)
        write_json(target / "metrics.json", metrics)
        with reusing_figures(target / "figures"):  # redraw only the charts whose inputs changed
            report = suite.render(metrics, records, manifest)
        if report.headline is None:
            report.headline = headline_of(suite, metrics, records, manifest)
        # the run-level warnings, decided for every suite alike from the manifest and metrics
        carried = "The runs it reads" if isinstance(metrics.get("banners"), list) else None  # compare, leaderboard
        report.banners[:0] = [t for t in banner_texts(banner_kinds(manifest_bytes(manifest), metrics), carried)
                              if t not in report.banners]
        write_report(report, target)
    return metrics


@contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a re-render. Why: the records read at
    the start live to the end, yet every full collection walked them again (about a
    second of a 5 s paper-scale support rescore). Reference counting still frees what
    is dropped; the few cycles made meanwhile (matplotlib figures) are collected once
    the collector resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# -- runs the budget stopped before anything could be scored -------------------------------


def incomplete_metrics(manifest: Mapping[str, Any], finished: Mapping[str, int]) -> dict[str, Any]:
    """``metrics.json`` of a run the budget cut short before anything could be scored:
    what is incomplete and what finished, and no score (unfinished work is never
    scored as failures)."""
    return {"status": "incomplete", "incomplete": list(manifest.get("incomplete") or []),
            "finished": dict(finished)}


def incomplete_report(title: str, metrics: Mapping[str, Any]) -> Report:
    """The report of such a run: says what is missing and how to finish it."""
    parts = ", ".join(metrics["incomplete"])
    return Report(
        title=title,
        subtitle="incomplete run",
        sections=[Section("Incomplete", [
            Callout(f"The run stopped before it finished ({parts} incomplete): its budget was "
                    "reached, or in batch mode its calls wait for batch results. Nothing is "
                    "scored: unfinished work is not counted as failures. Re-run the same command "
                    "(without --budget or with a larger one; in batch mode after importing the "
                    "results) to finish it from the cache without repeating a completed call.",
                    kind="warning"),
            KeyValue([(f"{k} finished", v) for k, v in metrics["finished"].items()]),
        ], anchor="incomplete")],
    )
