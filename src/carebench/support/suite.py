"""The support suite's skeleton objects (:mod:`carebench.engine.skeleton`), one per command.

``support run`` is :class:`SupportSuite`; a run directory whose manifest names a
``kind`` is another command's: ``calibration`` (:class:`JudgeCalibrationSuite`),
``coherence`` (:class:`~carebench.support.coherence.CoherenceSuite`) and ``probe``
(:class:`~carebench.support.probe.ProbeSuite`); the suite table
(:mod:`carebench.suites`) names the object that re-renders each kind. Every command writes its run
directory through :func:`carebench.engine.skeleton.run_suite`, so ``carebench report DIR``
reproduces each one's ``metrics.json`` and report byte for byte.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.compare.outline import write_outline
from carebench.datasets.files import read_text
from carebench.datasets.selection import select_ids
from carebench.engagement import engagement_question
from carebench.engagement.policy import check_refusal_policy
from carebench.engine.cache import CompletionCache
from carebench.engine.options import RunOptions, run_options
from carebench.engine.run import Run
from carebench.engine.rundir import (
    data_sha256,
    file_sha256,
    read_json,
    read_jsonl,
    run_dir_path,
    write_json,
)
from carebench.engine.skeleton import (
    Execution,
    Plan,
    incomplete_metrics,
    incomplete_report,
    rerender,
    run_suite,
    single_threaded_blas,
    stage,
)
from carebench.judging import JUDGE_MAX_TOKENS, ask, judge_calls, judge_request, panel_seats
from carebench.models.base import SpecLike
from carebench.models.families import panel_independence
from carebench.models.settings import model_settings
from carebench.report import Report
from carebench.resources.options import recheck_against
from carebench.support.compare import SupportComparer
from carebench.support.config import (
    SCOPE_CHOICES,
    SUITE,
    SupportRunConfig,
    check_score,
    judged_scopes,
    load_records,
    load_run,
    metrics_scope,
    support_metrics,
)
from carebench.support.engagement import (
    classify_responses,
    recorded_classes,
    with_engagement,
)
from carebench.support.generation import (
    GenerationConfig,
    assumed_response,
    generate,
    planned_generation,
    reference_responses,
)
from carebench.support.judging import criterion_question, judge_responses
from carebench.support.records import (
    PARQUET_COLUMNS,
    SCOPES,
    ResponseRecord,
    VerdictRecord,
    is_empty_reply,
    read_run_records,
)
from carebench.support.tasks import (
    Task,
    load_subcategories,
    load_tasks,
    select_split,
    unexpected_subcategories,
)
from carebench.types import CarebenchError


class SupportSuite:
    """The support suite in the run skeleton (:mod:`carebench.engine.skeleton`).

    Generation and judging share one run context: a budget stop in generation marks
    generation and judging ``incomplete`` (only conversations that finished every
    turn are kept, nothing is judged), a stop in judging keeps the verdicts that were
    answered. Neither is scored; re-running finishes from the cache.
    """

    name = SUITE


    def outline(self, run_dir: Path) -> None:
        """``comparison.json``, so leaderboards read this run in full only when they keep a system of it."""
        write_outline(run_dir, SupportComparer())

    def __init__(self, cfg: SupportRunConfig | None = None, recheck: Any = None):
        self.cfg = cfg
        #: ``rescore --resources``: (registry, locale) the recorded replies are checked against anew
        self.recheck = recheck
        self.panel_warnings: list[str] = []  # set by _prepare: why the panel is less independent

    def _prepare(self, run: Run):
        cfg = self.cfg
        assert cfg is not None, "a SupportSuite without a config can only score and render"
        cfg.validate()
        tasks = cfg.load_tasks()  # every row validated before any model call
        if cfg.task_format == "healthbench":
            from carebench.support.healthbench_tasks import describe_format

            note = describe_format(cfg.axes_map, cfg.subcategory_tag)
            if note not in cfg.notes:
                cfg.notes.append(note)
        if cfg.split != "all":
            tasks, source = select_split(tasks, cfg.split)
            cfg.notes.append(f"{cfg.split} split only ({len(tasks)} tasks; split from {source})")
        if cfg.task_ids:
            tasks = select_ids(tasks, cfg.task_ids, cfg.tasks, "task")
        if cfg.task_limit is not None:
            tasks = tasks[: cfg.task_limit]
        if cfg.subcategories_file:
            _warn_unexpected_subcategories(cfg, tasks)
        system_prompt = _read_system_prompt(cfg.system_prompt_file)
        gcfg = GenerationConfig(
            attempts=cfg.attempts, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
            caps=dict(cfg.caps), system_prompt=system_prompt, seed=cfg.seed,
            settings=model_settings([str(r) for r in cfg.responders], cfg.responder_settings_file, cfg.responder_options,
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
        from carebench.engine.runner import Call

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
        stages = [stage(run, "generation", gen_calls, exact=gen_exact),
                  stage(run, "judging", judge_calls, exact=all_known)]
        if cfg.engagement == "judge":  # an upper bound: the pre-filter decides some replies without a call
            from carebench.engagement.prefilter import prefilter_engagement
            from carebench.judging import judge_calls as engagement_calls
            from carebench.support.engagement import reply_of

            open_ = [r for r in responses if not r.is_harness_failure
                     and prefilter_engagement(r.final_reply, r.status) is None]
            stages.append(stage(run, "engagement", engagement_calls(
                [engagement_question(q.key, q.turns) for q in map(reply_of, open_)], judges,
                temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens), exact=all_known))
        notes = []
        if not all_known:
            notes.append("replies not in the cache are assumed to fill their output cap, so later "
                         "turns and judge prompts are estimated (an upper bound on their length)")
        return Plan(self.name, stages, notes)

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        tasks, responders, judges, gcfg, system_prompt = self._prepare(run)
        gen = generate(tasks, responders, run, gcfg)
        responses = list(gen.responses)
        if cfg.include_reference:
            responses.extend(reference_responses(tasks))
        verdicts: list[VerdictRecord] = []
        classes: dict = {}
        if gen.stopped:
            run.mark_incomplete("generation", gen.calls_skipped)
            run.mark_incomplete("judging", open_ended=True)  # its calls follow the replies not yet generated
        else:
            judged = judge_responses(
                tasks, responses, judges, run, scopes=judged_scopes(cfg.scope),  # type: ignore[arg-type]
                temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens,
            )
            verdicts = judged.verdicts
            if judged.stopped:
                run.mark_incomplete("judging", judged.calls_skipped)
            else:
                classes, skipped = classify_responses(responses, judges, run, mode=cfg.engagement,
                                                      temperature=cfg.judge_temperature,
                                                      max_tokens=cfg.judge_max_tokens)
                if skipped:
                    run.mark_incomplete("engagement", skipped)
        config = cfg.manifest_config()
        config["system_prompt"] = system_prompt
        from carebench.resources import load_registry
        from carebench.support.routing import with_checks

        registry = load_registry(cfg.resources)
        failures = {"responder_calls": sum(r.is_harness_failure for r in responses),
                    "judge_calls": sum(v.status == "error" for v in verdicts)}
        return Execution(
            records=with_engagement(with_checks([r.to_dict() for r in responses], tasks, cfg.locale, registry),
                                    classes)
            + [v.to_dict() for v in verdicts],
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
                               "seed": cfg.seed, "bootstrap": cfg.bootstrap, "family": dict(cfg.families),
                               "score": cfg.score, "engagement": cfg.engagement,
                               "refusal_policy": cfg.refusal_policy,
                               "critical_min_weight": cfg.critical_min_weight},
                   "generation": {str(m.spec): gcfg.effective(str(m.spec)) for m in responders},
                   "harness_failures": failures,
                   "resources": {**registry.summary(), "locale": cfg.locale},
                   "panel_warnings": list(self.panel_warnings),
                   "notes": list(cfg.notes)},
            # a harness failure leaves the run incomplete but scored without those conversations;
            # a re-run of the same command retries exactly the failed calls (never cached)
            failed_calls=sum(failures.values()),
            files={"tasks.jsonl": [t.to_row() for t in tasks]},
            parquet_columns=PARQUET_COLUMNS,
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> Any:
        """Column tables of every record, plus objects for the tasks the report shows."""
        from carebench.support.report import detail_task_ids

        run_dir = Path(run_dir)
        tasks = load_tasks(run_dir / "tasks.jsonl")
        if manifest.get("incomplete"):
            responses, verdicts = load_records(run_dir)
            return SupportRecords(tasks, responses=responses, verdicts=verdicts)
        rt, vt = read_run_records(run_dir)
        per_task = dict(zip(rt.tasks, np.bincount(rt.task, minlength=len(rt.tasks)).tolist(), strict=True))
        shown = detail_task_ids(tasks, per_task)
        responses, verdicts = load_records(run_dir, task_ids=set(shown))
        from carebench.support.routing import read_response_rows

        rows = read_response_rows(run_dir)
        checks = rows if manifest.get("resources") else []
        if self.recheck is not None:
            from carebench.support.routing import with_checks

            checks = with_checks(checks, tasks, self.recheck[1], self.recheck[0])
        replies = {(str(r["task_id"]), str(r["responder"]), int(r["attempt"])): str(r.get("final_reply") or "")
                   for r in rows}
        return SupportRecords(tasks, rt, vt, responses, verdicts, shown, checks, recorded_classes(rows), replies)

    def score(self, records: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
        if manifest.get("incomplete"):
            return incomplete_metrics(manifest, {"responses": len(records.responses),
                                                 "verdicts": len(records.verdicts)})
        from carebench.support.routing import routed_local, routing_block

        settings = manifest.get("scoring") or {}
        seed, B = int(settings.get("seed", 12345)), int(settings.get("bootstrap", 2000))
        metrics = support_metrics(
            records.tasks, records.response_table, records.verdict_table,
            panel=settings.get("panel"), scope=settings.get("scope", "final"),
            seed=seed, bootstrap=B,
            family=settings.get("family"), score_as=settings.get("score", "carebench"),
            routed_local=routed_local(records.checks) if manifest.get("resources") else None,
            engagement=records.engagement, refusal_policy=settings.get("refusal_policy", "seed"),
            critical_min_weight=settings.get("critical_min_weight"),
        )
        block = routing_block(records.tasks, records.checks, manifest, seed, B)
        if block is not None:
            metrics["resources"] = block
        return metrics

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.support.report import build_support_report

        if metrics.get("status") == "incomplete":
            return incomplete_report("Support: rubric-scored crisis support", metrics)
        from carebench.support.routing import report_examples

        report = build_support_report(manifest, records.tasks, records.responses, records.verdicts, metrics,
                                      manifest.get("scoring") or {}, records.shown, records.replies)
        if metrics.get("resources"):
            from carebench.resources.report import routing_section

            report.sections.append(routing_section(metrics["resources"],
                                                   report_examples(records.tasks, records.checks)))
        return report

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.support.report import support_headline

        return support_headline(metrics)


@dataclass
class SupportRecords:
    """A support run's records as ``score`` and ``render`` take them."""

    tasks: list[Task] = field(default_factory=list)
    response_table: Any = None  # support.records.ResponseTable (every response)
    verdict_table: Any = None  # support.records.VerdictTable (every verdict)
    responses: list[ResponseRecord] = field(default_factory=list)  # those of the shown tasks
    verdicts: list[VerdictRecord] = field(default_factory=list)
    shown: list[str] | None = None
    #: every response row (with its recorded ``resources`` check), when the run recorded one
    checks: list[dict[str, Any]] = field(default_factory=list)
    #: (task, responder, attempt) -> the final reply's engagement class (None: undecided)
    engagement: dict[tuple[str, str, int], str | None] | None = None
    #: (task, responder, attempt) -> the final reply (quoted as the evidence of a critical failure)
    replies: dict[tuple[str, str, int], str] = field(default_factory=dict)


def run_support(cfg: SupportRunConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """Run the suite; returns the run directory (or the call plan for a dry run)."""
    return run_suite(SupportSuite(cfg), cfg.options, cache=cache)


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


def rescore(
    run_dir: Path,
    *,
    panel: Sequence[str] | None = None,
    scope: str | None = None,
    out_dir: Path | None = None,
    family: dict[str, str] | None = None,
    score_as: str | None = None,
    resources: str | None = None,
    locale: str | None = None,
    refusal_policy: str | None = None,
    critical_min_weight: float | None = None,
) -> dict[str, Any]:
    """Recompute ``metrics.json`` and the report from the recorded verdicts only.

    With no overrides it uses the run's own settings (so it reproduces the run's
    metrics exactly); ``panel``/``scope`` re-score with another panel or scope
    (e.g. leave-one-judge-out), writing into ``out_dir`` when given. ``score_as``
    (``--score``) adds or drops HealthBench's score; rescoring in place records
    that choice in ``manifest.json``, so ``carebench report DIR`` reproduces it.
    """
    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("suite") != SUITE:
        raise CarebenchError(f"{run_dir} is a {manifest.get('suite')!r} run, not a support run")
    if manifest.get("kind") is not None:
        raise CarebenchError(f"{run_dir} is a support {manifest['kind']} run; rescore takes a support run "
                             "directory (carebench report DIR re-renders it)")
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
    if score_as is not None and score_as != (manifest.get("scoring") or {}).get("score", "carebench"):
        check_score(score_as)
        manifest = {**manifest, "scoring": {**(manifest.get("scoring") or {}), "score": score_as}}
        if out_dir is None:  # the run directory's own metrics follow its manifest
            recorded = read_json(run_dir / "manifest.json")
            write_json(run_dir / "manifest.json",
                       {**recorded, "scoring": {**(recorded.get("scoring") or {}), "score": score_as}})
    if refusal_policy is not None and refusal_policy != (manifest.get("scoring") or {}).get("refusal_policy", "seed"):
        check_refusal_policy(refusal_policy)  # the recorded classes are re-read: no model call
        manifest = {**manifest, "scoring": {**(manifest.get("scoring") or {}), "refusal_policy": refusal_policy}}
        if out_dir is None:  # the run directory's own metrics follow its manifest
            recorded = read_json(run_dir / "manifest.json")
            write_json(run_dir / "manifest.json", {**recorded, "scoring": {**(recorded.get("scoring") or {}),
                                                                           "refusal_policy": refusal_policy}})
    if critical_min_weight is not None:  # the critical rule is applied to the recorded verdicts anew
        manifest = {**manifest, "scoring": {**(manifest.get("scoring") or {}), "critical_min_weight": critical_min_weight}}
        if out_dir is None:
            recorded = read_json(run_dir / "manifest.json")
            write_json(run_dir / "manifest.json", {**recorded, "scoring": {
                **(recorded.get("scoring") or {}), "critical_min_weight": critical_min_weight}})
    recheck, block = recheck_against(resources, locale, manifest, run_dir, out_dir, "replies")
    if block is not None:
        manifest = {**manifest, "resources": block}
    return rerender(run_dir, SupportSuite(recheck=recheck), out_dir=out_dir, manifest=manifest)


# -- judge calibration (§3.3, B.1-B.7) ------------------------------------------------------

CALIBRATION_RESULT = "calibration.json"  # the comparison and selection, recorded when computed


@dataclass
class JudgeCalibrationConfig:
    labels: str
    candidates: list[SpecLike]  # parsed by the command line (text is parsed by ``Run.model``)
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
    options: RunOptions = field(default_factory=run_options)


class JudgeCalibrationSuite:
    """``support calibrate`` in the run skeleton: ask every candidate judge about every
    clinician-labelled (task, response, criterion), then compare candidates and every
    panel with the clinician consensus.

    The responses and tasks come from a support run directory (``--run``): a label's
    ``response_id`` is ``<responder>#<attempt>`` of a response recorded there. The
    comparison needs every candidate on every label, so a budget stop writes nothing
    (``Run.finish`` raises before the run directory exists). The result is computed
    once (``calibration.json``, written with the records); ``score`` reads it back, so
    ``carebench report DIR`` reproduces ``metrics.json`` byte for byte.
    """

    name = SUITE

    def __init__(self, cfg: JudgeCalibrationConfig | None = None):
        self.cfg = cfg

    def _prepare(self):
        from carebench.support.calibration import load_labels

        cfg = self.cfg
        assert cfg is not None, "a JudgeCalibrationSuite without a config can only score and render"
        if cfg.scope not in SCOPE_CHOICES:
            raise CarebenchError(f"--scope must be one of {', '.join(SCOPE_CHOICES)}, got {cfg.scope!r}")
        labels = load_labels(cfg.labels)
        if cfg.verdicts is None and not cfg.candidates:
            raise CarebenchError("give --candidate judge specs (or --verdicts with recorded candidate verdicts)")
        tasks: list[Task] | None = None
        responses: list[ResponseRecord] = []
        verdicts: list[VerdictRecord] = []
        if cfg.run_dir:
            _, tasks, responses, _ = load_run(Path(cfg.run_dir))
        if cfg.verdicts:
            verdicts = [VerdictRecord.from_dict(r) for r in read_jsonl(Path(cfg.verdicts))
                        if r.get("kind", "verdict") == "verdict"]
        questions = []
        if cfg.candidates:
            if tasks is None:
                raise CarebenchError("--run DIR is needed to ask candidate judges (it holds the labelled responses)")
            by_key = {(r.task_id, f"{r.responder}#{r.attempt}"): r for r in responses}
            crit = {(t.id, c.id): c for t in tasks for c in t.criteria}
            wanted = sorted(set(zip(labels["task_id"], labels["response_id"], labels["criterion_id"], strict=True)))
            for task_id, rid, cid in wanted:
                r = by_key.get((task_id, rid))
                if r is None:
                    raise CarebenchError(f"{cfg.labels}: response {rid!r} of task {task_id!r} is not in {cfg.run_dir}")
                c = crit.get((task_id, cid))
                if c is None:
                    raise CarebenchError(f"{cfg.labels}: task {task_id!r} has no criterion {cid!r}")
                questions.extend(criterion_question(r, c, sc) for sc in judged_scopes(cfg.scope))
        return labels, tasks, verdicts, questions

    def plan(self, run: Run) -> Plan:
        cfg = self.cfg
        _, _, _, questions = self._prepare()
        if not cfg.candidates:
            return Plan(SUITE, [], ["recorded candidate verdicts (--verdicts): no model call"])
        models = [run.model(s) for s in cfg.candidates]
        judges = panel_seats([str(m.spec) for m in models], models)
        return Plan(SUITE, [stage(run, "candidate verdicts", judge_calls(
            questions, judges, temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens))],
            ["command: support calibrate"])

    def execute(self, run: Run) -> Execution:
        from carebench.support.calibration import calibrate_judges

        cfg = self.cfg
        labels, tasks, verdicts, questions = self._prepare()
        if cfg.candidates:
            models = [run.model(s) for s in cfg.candidates]
            judges = panel_seats([str(m.spec) for m in models], models)
            answers, _ = ask(questions, judges, run, stage="candidate verdicts",
                             description="candidate judge verdicts", temperature=cfg.judge_temperature,
                             max_tokens=cfg.judge_max_tokens)
            if run.stopped:  # calibration compares every candidate on every label: no partial result
                run.finish()
            for a in answers:
                task_id, responder, attempt, cid, scope = a.key
                verdicts.append(VerdictRecord(task_id, responder, attempt, cid, a.judge,
                                              getattr(a.value, "met", None) if a.status == "ok" else None,
                                              a.rationale, a.status, scope))
        with single_threaded_blas():  # the kappa intervals must not depend on the core count
            result = calibrate_judges(labels, verdicts, panel_size=cfg.panel_size, seed=cfg.seed, B=cfg.bootstrap,
                                      tasks=tasks, scope=metrics_scope(cfg.scope), family=cfg.families or None)
        return Execution(
            records=[v.to_dict() for v in verdicts],
            config={**asdict(cfg), "candidates": [str(c) for c in cfg.candidates]},  # specs as text
            dataset={"labels": cfg.labels, "sha256": file_sha256(Path(cfg.labels)), "run": cfg.run_dir},
            seeds={"bootstrap": cfg.seed},
            models=[str(c) for c in cfg.candidates],
            extra={"kind": "calibration"},
            artifacts=lambda d: write_json(d / CALIBRATION_RESULT, result),
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
        path = Path(run_dir) / CALIBRATION_RESULT
        if not path.is_file():  # written before calibration.json existed: metrics.json held the result
            path = Path(run_dir) / "metrics.json"
        return read_json(path)

    def score(self, records: dict[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return records

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.support.calibration_report import build_calibration_report

        return build_calibration_report(manifest, metrics)

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.support.calibration_report import calibration_headline

        return calibration_headline(metrics)


def run_calibration(cfg: JudgeCalibrationConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """``support calibrate``: the run directory (default ``runs/support-calibration-<time>``),
    or the plan of the candidate judges' calls for a dry run (``cfg.options.dry_run``)."""
    out = cfg.options.out if cfg.options.out is not None else run_dir_path("support-calibration")
    return run_suite(JudgeCalibrationSuite(cfg), cfg.options, out=out, cache=cache)
