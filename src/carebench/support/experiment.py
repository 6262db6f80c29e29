"""``carebench support run``: generate -> judge -> records -> metrics -> report.

Every model call goes through the Runner (cached, resumable, accounted), every
outcome is a record, and everything downstream of the records (metrics.json,
report) is recomputed by :func:`rescore` from the run directory alone, so a
rescore with the same settings reproduces ``metrics.json`` exactly and needs
no model.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.cache import CompletionCache
from carebench.datasets.files import read_text
from carebench.experiment import (
    Execution,
    Plan,
    incomplete_metrics,
    incomplete_report,
    rerender,
    run_suite,
    single_threaded_blas,
    stage,
)
from carebench.judging import JUDGE_MAX_TOKENS, panel_seats
from carebench.models.families import panel_independence
from carebench.models.settings import model_settings
from carebench.report import Report
from carebench.run import Run, RunOptions
from carebench.run_options import run_options
from carebench.rundir import (
    data_sha256,
    file_sha256,
    new_run_dir,
    read_json,
    write_json,
    write_jsonl,
    write_manifest,
)
from carebench.support.generation import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    GenerationConfig,
    assumed_response,
    generate,
    planned_generation,
    reference_responses,
)
from carebench.support.judging import judge_responses
from carebench.support.records import (
    PARQUET_COLUMNS,
    REFERENCE,
    ResponseRecord,
    VerdictRecord,
    is_empty_reply,
)
from carebench.support.tasks import (
    Task,
    load_subcategories,
    load_tasks,
    select_split,
    unexpected_subcategories,
)
from carebench.types import CarebenchError

SUITE = "support"
SCOPE_CHOICES = ("final", "anywhere", "both")


@dataclass
class SupportRunConfig:
    tasks: str
    responders: list[str]
    judges: list[str]
    attempts: int = 3
    scope: str = "final"  # final | anywhere | both (both judges twice; metrics use final)
    system_prompt_file: str | None = None
    include_reference: bool = False
    seed: int = 12345
    bootstrap: int = 2000
    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    caps: dict[str, int] = field(default_factory=dict)
    responder_options: list[str] = field(default_factory=list)  # SPEC:key=value (Appendix G)
    responder_settings_file: str | None = None  # .toml/.json table of settings per responder
    recollect_truncated: bool = False  # ask truncated replies again with a larger cap (Appendix G)
    recollect_cap: int | None = None  # that cap; None = twice the responder's cap
    judge_temperature: float = 0.0
    judge_max_tokens: int = JUDGE_MAX_TOKENS
    task_limit: int | None = None  # first N tasks only (demo / smoke runs)
    task_ids: list[str] | None = None  # only these tasks, in this order
    columns: str | None = None  # field=column mapping of the task file (--columns)
    subcategories_file: str | None = None  # expected subcategory names; others are warned about
    split: str = "all"  # public | private | all (§A.3 stratified split when the file has none)
    title: str = "Support: rubric-scored crisis support"
    notes: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # --family SPEC=NAME overrides
    #: the shared run flags (--out, --cache, --budget, ...; --retries is ``run.max_retries``)
    run: RunOptions = field(default_factory=run_options)

    def validate(self) -> None:
        if not self.responders and not self.include_reference:
            raise CarebenchError("give at least one --responder (or --include-reference)")
        if not self.judges:
            raise CarebenchError("give at least one --judge (DistressBench's panel has three)")
        if self.attempts < 1:
            raise CarebenchError(f"--attempts must be at least 1, got {self.attempts}")
        if self.scope not in SCOPE_CHOICES:
            raise CarebenchError(f"--scope must be one of {', '.join(SCOPE_CHOICES)}, got {self.scope!r}")
        if REFERENCE in self.responders:
            raise CarebenchError("'reference' is reserved for the task references (use --include-reference)")
        dup = sorted({r for r in self.responders if self.responders.count(r) > 1})
        if dup:
            raise CarebenchError(f"responder listed twice: {dup[0]}")
        if self.max_tokens < 1 or any(v < 1 for v in self.caps.values()):
            raise CarebenchError("output caps must be positive token counts")


def metrics_scope(scope: str) -> str:
    """The scope the headline metrics use (``both`` keeps final-turn as primary, §B.9)."""
    return "anywhere" if scope == "anywhere" else "final"


def judged_scopes(scope: str) -> tuple[str, ...]:
    return ("final", "anywhere") if scope == "both" else (scope,)


class SupportSuite:
    """The support suite in the run skeleton (:mod:`carebench.experiment`).

    Generation and judging share one run context: a budget stop in generation marks
    generation and judging ``incomplete`` (only conversations that finished every
    turn are kept, nothing is judged), a stop in judging keeps the verdicts that were
    answered. Neither is scored; re-running finishes from the cache.
    """

    name = SUITE

    def __init__(self, cfg: SupportRunConfig | None = None):
        self.cfg = cfg
        self.panel_warnings: list[str] = []  # set by _prepare: why the panel is less independent

    def _prepare(self, run: Run):
        cfg = self.cfg
        assert cfg is not None, "a SupportSuite without a config can only score and render"
        cfg.validate()
        tasks = load_tasks(cfg.tasks, columns=cfg.columns)  # every row validated before any model call
        if cfg.split != "all":
            tasks, source = select_split(tasks, cfg.split)
            cfg.notes.append(f"{cfg.split} split only ({len(tasks)} tasks; split from {source})")
        if cfg.task_ids:
            by_id = {t.id: t for t in tasks}
            missing = [i for i in cfg.task_ids if i not in by_id]
            if missing:
                raise CarebenchError(f"{cfg.tasks}: no task with id {missing[0]!r}")
            tasks = [by_id[i] for i in cfg.task_ids]
        if cfg.task_limit is not None:
            tasks = tasks[: cfg.task_limit]
        if cfg.subcategories_file:
            _warn_unexpected_subcategories(cfg, tasks)
        system_prompt = _read_system_prompt(cfg.system_prompt_file)
        gcfg = GenerationConfig(
            attempts=cfg.attempts, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
            caps=dict(cfg.caps), system_prompt=system_prompt, seed=cfg.seed,
            settings=model_settings(cfg.responders, cfg.responder_settings_file, cfg.responder_options,
                                    "--responder-option"),
            recollect_truncated=cfg.recollect_truncated, recollect_cap=cfg.recollect_cap,
        )
        responders = [run.model(s) for s in cfg.responders]
        judge_models = [run.model(s) for s in cfg.judges]
        judges = panel_seats([str(m.spec) for m in judge_models], judge_models)
        self.panel_warnings = panel_independence([str(m.spec) for m in judge_models],
                                                 [str(m.spec) for m in responders], dict(cfg.families) or None)
        for w in self.panel_warnings:
            print(f"carebench: warning: {w}", file=sys.stderr, flush=True)
        return tasks, responders, judges, gcfg, system_prompt

    def plan(self, run: Run) -> Plan:
        from carebench.judging import judge_request
        from carebench.runner import Call
        from carebench.support.judging import criterion_question

        cfg = self.cfg
        tasks, responders, judges, gcfg, _ = self._prepare(run)
        gen_calls, done, gen_exact = planned_generation(tasks, responders, run.cache, gcfg)
        convs = [(m, t, a) for m in responders for t in tasks for a in range(cfg.attempts)]
        responses = []
        for r, (m, t, a) in zip(done, convs, strict=True):
            if r is None:  # reply not yet known: assume it fills the output cap
                r = assumed_response(t, str(m.spec), a, gcfg.cap_for(str(m.spec)))
            responses.append(r)
        if cfg.include_reference:
            responses.extend(reference_responses(tasks))
        by_id = {t.id: t for t in tasks}
        judge_calls = [
            Call(j.model, judge_request(criterion_question(r, c, scope), j.seat,
                                        cfg.judge_temperature, cfg.judge_max_tokens))
            for r in responses if not is_empty_reply(r.final_reply, r.status)
            for scope in judged_scopes(cfg.scope)
            for c in by_id[r.task_id].criteria
            for j in judges
        ]
        all_known = all(d is not None for d in done)
        notes = []
        if not all_known:
            notes.append("replies not in the cache are assumed to fill their output cap, so later "
                         "turns and judge prompts are estimated (an upper bound on their length)")
        return Plan(self.name, [
            stage(run, "generation", gen_calls, exact=gen_exact),
            stage(run, "judging", judge_calls, exact=all_known),
        ], notes)

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        tasks, responders, judges, gcfg, system_prompt = self._prepare(run)
        gen = generate(tasks, responders, run, gcfg)
        responses = list(gen.responses)
        if cfg.include_reference:
            responses.extend(reference_responses(tasks))
        verdicts: list[VerdictRecord] = []
        if gen.stopped:
            run.mark_incomplete("generation", gen.calls_skipped)
            run.mark_incomplete("judging")
        else:
            judged = judge_responses(
                tasks, responses, judges, run, scopes=judged_scopes(cfg.scope),  # type: ignore[arg-type]
                temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens,
            )
            verdicts = judged.verdicts
            if judged.stopped:
                run.mark_incomplete("judging", judged.calls_skipped)
        config = {k: v for k, v in asdict(cfg).items() if k not in ("notes",)}
        config["system_prompt"] = system_prompt
        failures = {"responder_calls": sum(r.is_harness_failure for r in responses),
                    "judge_calls": sum(v.status == "error" for v in verdicts)}
        return Execution(
            records=[r.to_dict() for r in responses] + [v.to_dict() for v in verdicts],
            config=config,
            dataset={
                "source": cfg.tasks,
                "tasks": len(tasks),
                "criteria": sum(len(t.criteria) for t in tasks),
                "sha256": (file_sha256(Path(cfg.tasks)) if Path(cfg.tasks).is_file()
                           else data_sha256(t.to_row() for t in tasks)),
                "illustrative": all(t.illustrative for t in tasks),
            },
            seeds={"bootstrap": cfg.seed, "generation": cfg.seed},
            models=[str(m.spec) for m in responders] + [j.label for j in judges],
            extra={"scoring": {"panel": [j.label for j in judges], "scope": metrics_scope(cfg.scope),
                               "seed": cfg.seed, "bootstrap": cfg.bootstrap, "family": dict(cfg.families)},
                   "generation": {str(m.spec): gcfg.effective(str(m.spec)) for m in responders},
                   "harness_failures": failures,
                   "panel_warnings": list(self.panel_warnings),
                   "notes": list(cfg.notes)},
            # a harness failure leaves the run incomplete but scored without those conversations;
            # a re-run of the same command retries exactly the failed calls (never cached)
            failed_calls=sum(failures.values()),
            files={"tasks.jsonl": [t.to_row() for t in tasks]},
            parquet_columns=PARQUET_COLUMNS,
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> SupportRecords:
        """Column tables of every record, plus objects for the tasks the report shows."""
        from carebench.support.records import read_run_records
        from carebench.support.report import detail_task_ids

        run_dir = Path(run_dir)
        if manifest.get("kind") in ("calibration", "coherence"):  # scored when written; re-rendered as is
            return SupportRecords(recorded_metrics=read_json(run_dir / "metrics.json"))
        tasks = load_tasks(run_dir / "tasks.jsonl")
        if manifest.get("incomplete"):
            responses, verdicts = load_records(run_dir)
            return SupportRecords(tasks, responses=responses, verdicts=verdicts)
        rt, vt = read_run_records(run_dir)
        per_task = dict(zip(rt.tasks, np.bincount(rt.task, minlength=len(rt.tasks)).tolist(), strict=True))
        shown = detail_task_ids(tasks, per_task)
        responses, verdicts = load_records(run_dir, task_ids=set(shown))
        from carebench.support.records import probe_json

        return SupportRecords(tasks, rt, vt, responses, verdicts, shown, probe=probe_json(run_dir))

    def score(self, records: SupportRecords, manifest: Mapping[str, Any]) -> dict[str, Any]:
        if records.recorded_metrics is not None:
            return records.recorded_metrics
        if manifest.get("incomplete"):
            return incomplete_metrics(manifest, {"responses": len(records.responses),
                                                 "verdicts": len(records.verdicts)})
        settings = manifest.get("scoring") or {}
        metrics = support_metrics(
            records.tasks, records.response_table, records.verdict_table,
            panel=settings.get("panel"), scope=settings.get("scope", "final"),
            seed=int(settings.get("seed", 12345)), bootstrap=int(settings.get("bootstrap", 2000)),
            family=settings.get("family"),
        )
        if records.probe is not None:
            metrics["discrimination_probe"] = records.probe
        return metrics

    def render(self, metrics: Mapping[str, Any], records: SupportRecords,
               manifest: Mapping[str, Any]) -> Report:
        from carebench.support.report import build_calibration_report, build_support_report

        if records.recorded_metrics is not None:
            if manifest.get("kind") == "coherence":
                from carebench.support.coherence import coherence_report

                return coherence_report(dict(metrics))
            return build_calibration_report(manifest, metrics)
        if metrics.get("status") == "incomplete":
            return incomplete_report("Support: rubric-scored crisis support", metrics)
        return build_support_report(manifest, records.tasks, records.responses, records.verdicts, metrics,
                            manifest.get("scoring") or {}, records.shown)


@dataclass
class SupportRecords:
    """A support run's records as ``score`` and ``render`` take them."""

    tasks: list[Task] = field(default_factory=list)
    response_table: Any = None  # support.records.ResponseTable (every response)
    verdict_table: Any = None  # support.records.VerdictTable (every verdict)
    responses: list[ResponseRecord] = field(default_factory=list)  # those of the shown tasks
    verdicts: list[VerdictRecord] = field(default_factory=list)
    shown: list[str] | None = None
    recorded_metrics: dict[str, Any] | None = None  # calibration runs: metrics as recorded
    probe: dict[str, Any] | None = None  # probe/probe.json of ``support probe`` (§4.3, E.7)


def run_support(cfg: SupportRunConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """Run the suite; returns the run directory (or the call plan for a dry run)."""
    return run_suite(SupportSuite(cfg), cfg.run, cache=cache)


def _warn_unexpected_subcategories(cfg: SupportRunConfig, tasks: Sequence[Task]) -> None:
    """Names outside the declared set are kept and analysed, but flagged (stderr and report)."""
    extra = unexpected_subcategories(tasks, load_subcategories(cfg.subcategories_file or ""))
    if extra:
        listed = ", ".join(f"{k} ({n} task{'s' if n > 1 else ''})" for k, n in extra.items())
        msg = f"subcategories not in {cfg.subcategories_file}: {listed}"
        print(f"carebench: warning: {msg}", file=sys.stderr, flush=True)
        cfg.notes.append(msg)


def _read_system_prompt(path: str | None) -> str | None:
    if not path:
        return None
    return read_text(path).strip() or None  # missing or non-UTF-8 file: one line naming it


# -- rescoring from records alone ---------------------------------------------------------


def incomplete_message(run_dir: Path) -> str | None:
    """One line for an incomplete run (harness failures), or None when it is complete."""
    m = read_json(Path(run_dir) / "manifest.json")
    f = m.get("harness_failures") or {}
    if m.get("status") != "incomplete" or not any(f.values()):
        return None
    return (f"run incomplete: {f.get('responder_calls', 0)} responder call(s) and {f.get('judge_calls', 0)} "
            f"judge call(s) failed after every retry; those conversations are excluded from the scores "
            f"and counted. Re-run the same command to retry them")


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[Task], list[ResponseRecord], list[VerdictRecord]]:
    """Manifest, tasks, responses and verdicts of a run directory (no model needed)."""
    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("suite") != SUITE:
        raise CarebenchError(f"{run_dir} is a {manifest.get('suite')!r} run, not a support run")
    tasks = load_tasks(run_dir / "tasks.jsonl")
    responses, verdicts = load_records(run_dir)
    return manifest, tasks, responses, verdicts


def support_metrics(
    tasks: Sequence[Task],
    responses: Sequence[ResponseRecord],
    verdicts: Sequence[VerdictRecord],
    *,
    panel: Sequence[str] | None,
    scope: str,
    seed: int,
    bootstrap: int,
    family: dict[str, str] | None = None,
) -> dict[str, Any]:
    from carebench.support.analyses import analyze

    # plain JSON data (``analyze`` cleans its result): metrics.json and a rescore compare equal
    return analyze(tasks, responses, verdicts, panel=list(panel) if panel else None,
                   scope=scope, seed=seed, B=bootstrap, family=family or None)


def rescore(
    run_dir: Path,
    *,
    panel: Sequence[str] | None = None,
    scope: str | None = None,
    out_dir: Path | None = None,
    family: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Recompute ``metrics.json`` and the report from the recorded verdicts only.

    With no overrides it uses the run's own settings (so it reproduces the run's
    metrics exactly); ``panel``/``scope`` re-score with another panel or scope
    (e.g. leave-one-judge-out), writing into ``out_dir`` when given.
    """
    from carebench.support.records import SCOPES, read_run_records

    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("suite") != SUITE:
        raise CarebenchError(f"{run_dir} is a {manifest.get('suite')!r} run, not a support run")
    if family:
        manifest = {**manifest, "scoring": {**(manifest.get("scoring") or {}), "family": dict(family)}}
    if panel or scope:
        settings = dict(manifest.get("scoring") or {})
        _, vt = read_run_records(run_dir)
        if panel:
            missing = [p for p in panel if p not in vt.judges]
            if missing:
                raise CarebenchError(f"no recorded verdicts from judge {missing[0]!r}; recorded: {vt.judges}")
            settings["panel"] = list(panel)
        if scope:
            if scope not in SCOPES:
                raise CarebenchError(f"--scope must be final or anywhere, got {scope!r}")
            if not (vt.scope == SCOPES.index(scope)).any():
                raise CarebenchError(
                    f"{run_dir} has no {scope!r}-scope verdicts (run with --scope {scope} or --scope both)"
                )
            settings["scope"] = scope
        manifest = {**manifest, "scoring": settings}
    return rerender(run_dir, SupportSuite(), out_dir=out_dir, manifest=manifest)


def load_records(run_dir: Path, task_ids: set[str] | None = None) -> tuple[list[ResponseRecord], list[VerdictRecord]]:
    """Response and verdict records of a run, optionally only those of some tasks."""
    from carebench.support.records import read_run_rows

    responses: list[ResponseRecord] = []
    verdicts: list[VerdictRecord] = []
    for row in read_run_rows(run_dir, task_ids):
        if row.get("kind") == "response":
            responses.append(ResponseRecord.from_dict(row))
        elif row.get("kind") == "verdict":
            verdicts.append(VerdictRecord.from_dict(row))
    return responses, verdicts


# -- judge calibration (§3.3, B.1-B.7) ------------------------------------------------------


@dataclass
class CalibrationConfig:
    labels: str
    candidates: list[str]
    run_dir: str | None = None  # support run directory holding the labelled responses and tasks
    #: final (default), anywhere, or both: candidates asked in both scopes so the agreement
    #: of the two scoring rules with the clinicians can be compared (B.9); selection uses final
    scope: str = "final"
    verdicts: str | None = None  # recorded candidate verdicts (JSONL/CSV/Parquet) instead of calls
    panel_size: int = 3
    seed: int = 12345  # bootstrap seed of the lead interval (carebench default)
    bootstrap: int = 2000
    judge_temperature: float = 0.0
    judge_max_tokens: int = JUDGE_MAX_TOKENS
    families: dict[str, str] = field(default_factory=dict)  # --family SPEC=NAME overrides
    #: the shared run flags (--out, --cache, --budget, ...)
    run: RunOptions = field(default_factory=run_options)


def run_calibration(cfg: CalibrationConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """Ask every candidate judge about every clinician-labelled (task, response, criterion),
    then compare candidates and every panel with the clinician consensus.

    The responses and tasks come from a support run directory (``--run``): a label's
    ``response_id`` is ``<responder>#<attempt>`` of a response recorded there. A dry run
    (``cfg.run.dry_run``) returns the plan of the candidate judges' calls.
    """
    from carebench.judging import ask
    from carebench.rundir import read_jsonl
    from carebench.support.calibration import calibrate_judges, load_labels
    from carebench.support.judging import criterion_question

    if cfg.scope not in SCOPE_CHOICES:
        raise CarebenchError(f"--scope must be one of {', '.join(SCOPE_CHOICES)}, got {cfg.scope!r}")
    labels = load_labels(cfg.labels)
    if cfg.verdicts is None and not cfg.candidates:
        raise CarebenchError("give --candidate judge specs (or --verdicts with recorded candidate verdicts)")
    tasks: list[Task] | None = None
    verdicts: list[VerdictRecord] = []
    call_rows: list[dict[str, Any]] = []
    if cfg.run_dir:
        _, tasks, responses, _ = load_run(Path(cfg.run_dir))
    if cfg.verdicts:
        verdicts = [VerdictRecord.from_dict(r) for r in read_jsonl(Path(cfg.verdicts))
                    if r.get("kind", "verdict") == "verdict"]
    if cfg.run.dry_run and not cfg.candidates:
        return Plan(SUITE, [], ["recorded candidate verdicts (--verdicts): no model call"])
    if cfg.candidates:
        if tasks is None:
            raise CarebenchError("--run DIR is needed to ask candidate judges (it holds the labelled responses)")
        by_key = {(r.task_id, f"{r.responder}#{r.attempt}"): r for r in responses}
        crit = {(t.id, c.id): c for t in tasks for c in t.criteria}
        wanted = sorted(set(zip(labels["task_id"], labels["response_id"], labels["criterion_id"], strict=True)))
        questions = []
        for task_id, rid, cid in wanted:
            r = by_key.get((task_id, rid))
            if r is None:
                raise CarebenchError(f"{cfg.labels}: response {rid!r} of task {task_id!r} is not in {cfg.run_dir}")
            c = crit.get((task_id, cid))
            if c is None:
                raise CarebenchError(f"{cfg.labels}: task {task_id!r} has no criterion {cid!r}")
            questions.extend(criterion_question(r, c, sc) for sc in judged_scopes(cfg.scope))
        run = Run(cfg.run, cache=cache)
        with run:
            models = [run.model(s) for s in cfg.candidates]
            judges = panel_seats([str(m.spec) for m in models], models)
            if cfg.run.dry_run:
                from carebench.judging import judge_calls

                return Plan(SUITE, [stage(run, "candidate verdicts", judge_calls(
                    questions, judges, temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens))],
                    ["command: support calibrate"])
            answers, _ = ask(questions, judges, run, stage="candidate verdicts",
                             description="candidate judge verdicts", temperature=cfg.judge_temperature,
                             max_tokens=cfg.judge_max_tokens)
        if run.stopped:  # calibration compares every candidate on every label: no partial result
            run.finish()
        call_rows = run.call_rows
        for a in answers:
            task_id, responder, attempt, cid, scope = a.key
            verdicts.append(VerdictRecord(task_id, responder, attempt, cid, a.judge,
                                          getattr(a.value, "met", None) if a.status == "ok" else None,
                                          a.rationale, a.status, scope))
    with single_threaded_blas():  # the kappa intervals must not depend on the core count
        result = calibrate_judges(labels, verdicts, panel_size=cfg.panel_size, seed=cfg.seed, B=cfg.bootstrap,
                                  tasks=tasks, scope=metrics_scope(cfg.scope), family=cfg.families or None)
    run_dir = new_run_dir("support-calibration", cfg.run.out)
    write_jsonl(run_dir / "records.jsonl", [v.to_dict() for v in verdicts])
    write_jsonl(run_dir / "calls.jsonl", call_rows)
    write_manifest(
        run_dir, suite=SUITE, config={k: v for k, v in asdict(cfg).items()},
        models=list(cfg.candidates), seeds={"bootstrap": cfg.seed},
        dataset={"labels": cfg.labels, "sha256": file_sha256(Path(cfg.labels)), "run": cfg.run_dir},
        extra={"kind": "calibration"},
    )
    write_json(run_dir / "metrics.json", result)
    from carebench.report import write_report
    from carebench.support.report import build_calibration_report

    write_report(build_calibration_report(read_json(run_dir / "manifest.json"), result), run_dir)
    return run_dir
