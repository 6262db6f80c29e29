"""The plural suite's skeleton objects (:mod:`carebench.experiment`), one per command.

Each plural command is its own object (a :class:`~carebench.plural.runs.PluralCommand`):
:class:`SampleCommand` (``plural sample``), :class:`RunCommand` (``plural run``; ``plural
rescore`` re-scores its run directories), :class:`CalibrateCommand`, :class:`FreezeCommand`,
:class:`LabelCommand` and :class:`AgreementCommand`, each run by its ``run_*`` function
through :func:`carebench.experiment.run_suite`. The commands are thin: the pure work
(release and sample checks, records, metrics, selection, the release writer) lives in the
concept modules (:mod:`~carebench.plural.experiment`, :mod:`~carebench.plural.calibration`,
:mod:`~carebench.plural.release`, :mod:`~carebench.plural.agreement`), which never import
this one. A run directory's manifest names its ``kind``; the suite table
(:mod:`carebench.suites`) names the command that re-scores and re-renders each kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from carebench.cache import CompletionCache
from carebench.experiment import Execution, Plan, incomplete_metrics, rerender, stage
from carebench.plural import selection as sel
from carebench.plural.agreement import AgreementConfig, agreement_metrics, agreement_records
from carebench.plural.calibration import (
    METHOD_ORDER,
    ProfileCalibrationConfig,
    dataset_info,
    fold_fits,
    later_round_calls,
    profile_record,
    score_calibration,
)
from carebench.plural.data import (
    check_contexts,
    is_builtin,
    load_calibration,
    load_prompt_file,
    load_vocabulary,
    resolve,
)
from carebench.plural.experiment import (
    JURY_BATCH,
    PluralRunConfig,
    Release,
    SampleRunConfig,
    archetype_profiles,
    check_release,
    compute_metrics,
    examples,
    family_warnings,
    load_release,
    load_run,
    select_prompts,
)
from carebench.plural.jury import judgment_records, plan_jury
from carebench.plural.policy import label_space
from carebench.plural.profiles import FitData, Profile, get_method
from carebench.plural.profiles.base import Env
from carebench.plural.profiles.gepa_light import METRIC_CALLS, MINIBATCH
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.prompting import label_request
from carebench.plural.records import PARQUET_COLUMNS, JudgmentRecord, ResponseRecord
from carebench.plural.release import (
    FreezeConfig,
    LabelConfig,
    Leakage,
    aliases,
    label_metrics,
    leakage_exclusions,
    load_profiles,
    method_overrides,
    write_release,
)
from carebench.plural.responses import response_calls, response_records
from carebench.plural.runs import (
    SUITE,
    CutShort,
    PluralCommand,
    estimated_stage,
    run_plural_command,
)
from carebench.plural.sample import composition, draw_sample
from carebench.report import Report
from carebench.run import Run
from carebench.rundir import file_sha256, new_run_dir, read_json, write_json
from carebench.runner import Call, call_key
from carebench.types import CarebenchError, Completion, is_harness_failure

# -- sample and run (VEILED-SH, §5.3, §6, Appendix D) ------------------------------------------


class SampleCommand(PluralCommand):
    """``plural sample`` on the run skeleton (no model call). The composition is worked
    out against the release when the sample is drawn and recorded in the manifest, so
    ``carebench report`` re-renders it without the release."""

    title = "Plural: diagnostic sample"

    def draw(self) -> tuple[Release, list[Any], dict[str, Any]]:
        cfg = self.config()
        release = load_release(cfg.release)
        sample = draw_sample(release.prompts, release.policies, cfg.sample_config())
        summary = {
            "release_prompts": len(release.prompts),
            "sample_size": len(sample),
            "reserved": sum(1 for s in sample if s.reason != "weighted"),
            "model_calls": 0,
            "composition": composition(release.prompts, release.policies, [s.prompt_id for s in sample]),
        }
        return release, sample, summary

    def plan(self, run: Run) -> Plan:
        return Plan(self.name, [], ["drawing a sample makes no model call"])

    def execute(self, run: Run) -> Execution:
        release, sample, summary = self.draw()
        rows = [s.to_dict() for s in sample]
        return Execution(records=rows, config=asdict(self.cfg), dataset=release.dataset(),
                         seeds={"sample": self.cfg.seed}, models=[],
                         extra={"kind": "sample", "summary": summary}, files={"sample.jsonl": rows})

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return dict(manifest["summary"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.report import build_sample_report

        return build_sample_report(manifest, metrics)


def run_sample(cfg: SampleRunConfig) -> Path | dict[str, Any]:
    """Draw the diagnostic sample and write it as a run directory (or describe it: dry run,
    which prints the composition: there are no calls to plan)."""
    if cfg.run.dry_run:
        return SampleCommand(cfg).draw()[2]
    return run_plural_command(SampleCommand(cfg), cfg, "sample")


@dataclass
class Prepared:
    """What a plural run's plan and execution share once the inputs are validated."""

    release: Release
    taxonomy: Any
    contexts: dict[str, Any]
    prompts: list[Any]
    policies: list[Any]
    sample_rows: list[dict[str, Any]]
    profiles_of: dict[str, list[str]]
    calls: list[Any]  # the response calls
    judges: list[Any]  # carebench.judging.Judge seats
    warnings: list[str]

    def jury(self, responses: Sequence[ResponseRecord]) -> tuple[list[Any], list[JudgmentRecord]]:
        by_id = {p.id: p for p in self.prompts}
        pol_of = {(p.prompt_id, p.profile): p for p in self.policies}
        return plan_jury(responses, by_id, pol_of, self.profiles_of, [j.label for j in self.judges],
                         self.taxonomy, self.contexts)


class RunCommand(PluralCommand):
    """``plural run`` on the run skeleton: responses -> jury -> records -> metrics -> report.

    Responses and the jury share one run context, so the budget caps the whole
    command. A stop while responding keeps the responses that finished and judges
    nothing (``responses`` and ``jury`` incomplete); a stop in the jury keeps the
    verdicts that were answered (``jury`` incomplete). Neither is scored; re-running
    the same command finishes from the cache. A call that failed after its retries is
    a harness failure: recorded, counted, never scored as the system's or judge's answer.
    """

    title = "Plural: alignment with practitioner-calibrated policies"

    def _prepare(self, run: Run) -> Prepared:
        from carebench.judging import panel_seats
        from carebench.taxonomy import load_contexts, load_taxonomy

        cfg = self.config()
        cfg.validate()
        release = load_release(cfg.release)  # every row validated before any model call
        taxonomy = load_taxonomy(cfg.taxonomy)
        contexts = load_contexts(cfg.contexts)
        check_release(release, taxonomy, contexts)
        prompts, policies, sample_rows = select_prompts(release, cfg)
        profiles_of = {a: p for a, p in archetype_profiles(policies).items() if a in cfg.archetypes}
        lacking = [a for a in cfg.archetypes if a not in profiles_of]
        if lacking:
            raise CarebenchError(f"the release has no {lacking[0]!r} profiles; choose --archetype from "
                                 f"{', '.join(sorted(profiles_of)) or 'none'}")
        bad_ctx = next((p for p in prompts if p.context not in contexts), None)
        if bad_ctx is not None:
            raise CarebenchError(f"prompt {bad_ctx.id}: context {bad_ctx.context!r} has no interaction contract; "
                                 f"known: {', '.join(sorted(contexts))}")
        systems = [run.model(s) for s in cfg.systems]
        judge_models = [run.model(s) for s in cfg.judges]
        judges = panel_seats([str(m.spec) for m in judge_models], judge_models)
        warnings = family_warnings([str(m.spec) for m in systems], [str(m.spec) for m in judge_models],
                                   cfg.families)
        if cfg.reasoning_effort:  # a request option of the systems' clients (part of their cache keys)
            for m in systems:
                if hasattr(m, "request_options"):
                    m.request_options = replace(m.request_options, reasoning_effort=cfg.reasoning_effort)
                else:
                    warnings.append(f"--reasoning-effort {cfg.reasoning_effort} is not sent to {m.spec}: "
                                    "its provider takes no reasoning options")
        calls = response_calls(prompts, systems, list(profiles_of), contexts, cfg.response_config())
        return Prepared(release, taxonomy, contexts, prompts, policies, sample_rows, profiles_of, calls, judges,
                        warnings)

    def plan(self, run: Run) -> Plan:
        """Responses are exact; jury questions contain the replies, so a reply not yet in
        the cache is assumed to fill its output cap (an upper bound on the prompt)."""
        from carebench.judging import judge_calls

        cfg = self.cfg
        pre = self._prepare(run)
        cached = [run.cache.get(call_key(c)) if run.cache is not None else None for c in pre.calls]
        known = all(c is not None for c in cached)
        # a reply not yet made: as long as its cap allows, and distinct (replies of different
        # systems are judged by separate calls), so the jury is counted and costed at most
        comps = [c if c is not None else Completion(text=f"[{i}]".ljust(4 * cfg.max_tokens, "x"))
                 for i, c in enumerate(cached)]
        questions, _ = pre.jury(response_records(pre.calls, comps))
        jury = judge_calls(questions, pre.judges, temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens)
        notes = [*pre.warnings, f"{len(pre.prompts)} sampled prompts; archetypes and profiles: "
                 + "; ".join(f"{a}: {', '.join(p)}" for a, p in pre.profiles_of.items())]
        if not known:
            notes.append("replies not in the cache are assumed to fill their output cap, so the jury's "
                         "prompts are estimated (an upper bound on their length)")
        return Plan(self.name, [stage(run, "responses", pre.calls), stage(run, "jury", jury, exact=known)], notes)

    def execute(self, run: Run) -> Execution:
        from carebench.judging import judge_calls, read_answers

        cfg = self.cfg
        pre = self._prepare(run)
        res = run.calls(pre.calls, "responses", stage="responses")
        responses = response_records(pre.calls, res.completions)
        verdicts: list[JudgmentRecord] = []
        if res.not_made:
            run.mark_incomplete("responses")
            # the finished responses' verdicts are calls left for sure (the rest depend on replies)
            run.mark_incomplete("jury", len(pre.jury(responses)[0]) * len(pre.judges), open_ended=True)
        else:
            questions, fixed = pre.jury(responses)
            verdicts.extend(fixed)
            for start in range(0, len(questions), JURY_BATCH):  # bounds memory at paper scale
                batch = questions[start:start + JURY_BATCH]
                jres = run.calls(judge_calls(batch, pre.judges, temperature=cfg.judge_temperature,
                                             max_tokens=cfg.judge_max_tokens), "jury verdicts", stage="jury")
                answers = read_answers(batch, pre.judges, jres.completions)
                verdicts.extend(judgment_records([a for a in answers if a.completion is not None]))
                if jres.not_made:
                    later = len(questions) - start - len(batch)
                    run.mark_incomplete("jury", later * len(pre.judges))
                    break
        config = {k: v for k, v in asdict(cfg).items() if k != "notes"}
        settings = {
            "categories": pre.taxonomy.codes("response"),
            "empty_policy": cfg.empty_policy,
            "zero_coverage": cfg.zero_coverage,
            "seed": cfg.seed,
            "bootstrap": cfg.bootstrap,
            "alpha": cfg.alpha,
            "judges": [j.label for j in pre.judges],
        }
        # calls that failed every retry (server down, timeout, HTTP 5xx) make the run incomplete;
        # a permanent rejection (HTTP 4xx) is the request's outcome. Both are left out and counted.
        failures = {"response_calls": sum(r.status == "error" and is_harness_failure(r.error) for r in responses),
                    "jury_calls": sum(v.status == "error" and is_harness_failure(v.rationale) for v in verdicts)}
        from carebench.plural.routing import with_checks
        from carebench.resources import load_registry

        registry = load_registry(cfg.resources)
        return Execution(
            records=with_checks([r.to_dict() for r in responses], pre.prompts, cfg.locale, registry)
            + [v.to_dict() for v in _ordered(verdicts)],
            config=config,
            dataset={**pre.release.dataset(), "sampled_prompts": len(pre.prompts)},
            seeds={"bootstrap": cfg.seed, "sample": cfg.sample_seed},
            models=[*cfg.systems, *[j.label for j in pre.judges]],
            extra={"kind": "run", "scoring": settings, "warnings": pre.warnings, "notes": list(cfg.notes),
                   "profiles": pre.profiles_of, "harness_failures": failures,
                   "taxonomy_names": pre.taxonomy.names(),  # reports show names, not codes
                   "output_modes": run.output_modes(),
                   "resources": {**registry.summary(), "locale": cfg.locale}},
            # harness failures are counted and left out of the scores; a re-run retries them
            failed_calls=sum(failures.values()),
            parquet_columns=PARQUET_COLUMNS,  # re-scoring reads these columns, not the JSON
            files={"sample.jsonl": pre.sample_rows,
                   "prompts.jsonl": [p.model_dump(mode="json") for p in pre.prompts],
                   "policies.jsonl": [p.model_dump(mode="json") for p in pre.policies]},
        )

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> Any:
        if manifest.get("incomplete"):
            return super().read_records(run_dir, manifest)
        return load_run(Path(run_dir), manifest)

    def score(self, records: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
        if manifest.get("incomplete"):
            kinds = Counter(r.get("kind") for r in records)
            return incomplete_metrics(manifest, {"responses": kinds["response"], "verdicts": kinds["judgment"]})
        settings = dict(manifest.get("scoring") or {})
        metrics = compute_metrics(records.jury_data(settings.get("scored_judges")), settings)
        if manifest.get("resources"):
            from carebench.plural.routing import read_response_rows, routing_block

            block = routing_block(records.prompts, read_response_rows(records.path), manifest)
            if block is not None:
                metrics["resources"] = block
        return metrics

    def full_report(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.report import build_report

        settings = manifest.get("scoring") or {}
        report = build_report(manifest, metrics, examples(records, records.jury_data(settings.get("scored_judges"))))
        if metrics.get("resources"):
            from carebench.plural.routing import read_response_rows, report_examples
            from carebench.resources.report import routing_section

            rows = read_response_rows(records.path)
            report.sections.append(routing_section(metrics["resources"], report_examples(records.prompts, rows)))
        return report

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.report import plural_headline

        return plural_headline(metrics)


def run_plural(cfg: PluralRunConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """Run the evaluation; returns the run directory (or the call plan for a dry run)."""
    return run_plural_command(RunCommand(cfg), cfg, "run", cache)


def _ordered(verdicts: list[JudgmentRecord]) -> list[JudgmentRecord]:
    return sorted(verdicts, key=lambda v: (v.system, v.archetype, v.prompt_id, v.profile, v.judge))


# -- rescoring a run from its records alone ----------------------------------------------------


def rescore(run_dir: Path, *, judges: Sequence[str] | None = None, out_dir: Path | None = None,
            B: int | None = None, resources: str | None = None, locale: str | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json`` and the report from the records only (no model call).

    With no overrides it reproduces the run's own metrics exactly (it is what
    ``carebench report`` does); ``judges`` re-scores with a subset of the jury (e.g.
    leaving one judge out) into ``out_dir`` when given.
    """
    manifest = read_json(Path(run_dir) / "manifest.json")
    if manifest.get("suite") != SUITE or manifest.get("kind") != "run":
        raise CarebenchError(f"{run_dir} is not a plural run directory (suite {manifest.get('suite')!r}, "
                             f"kind {manifest.get('kind')!r})")
    scoring = dict(manifest.get("scoring") or {})
    if judges:
        known = list(scoring.get("judges") or [])
        unknown = [j for j in judges if known and j not in known]
        if unknown:
            raise CarebenchError(f"--judge {unknown[0]!r} is not one of the run's judges ({', '.join(known)})")
        scoring["scored_judges"] = list(dict.fromkeys(judges))
    if B is not None:
        scoring["bootstrap"] = B
    rescored = {**manifest, "scoring": scoring}
    recheck = None
    if resources is not None or locale is not None:  # where replies send a person, against another registry
        from carebench.resources import load_registry
        from carebench.resources.options import run_locale

        if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
            raise CarebenchError("--resources/--locale re-check the replies: give --out (the run's records "
                                 "keep the checks it recorded)")
        registry = load_registry(resources)
        loc = run_locale(locale) if locale is not None else (manifest.get("resources") or {}).get("locale")
        recheck = (registry, loc)
        rescored["resources"] = {**registry.summary(), "locale": loc}
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        return rerender(run_dir, RunCommand(), manifest=rescored)
    return _rescore_into(Path(run_dir), Path(out_dir), rescored, recheck)


#: what a re-score writes itself; every other file of the run is copied unchanged
_RENDERED = ("manifest.json", "metrics.json", "report.md", "report.html", "figures")


def _rescore_into(run_dir: Path, out_dir: Path, manifest: dict[str, Any], recheck: Any = None) -> dict[str, Any]:
    """A re-score as a run directory of its own: the source run's records copied unchanged,
    then metrics and the report, then (last) a manifest naming the source run and the judges
    kept, so ``carebench report OUT`` re-renders it and the source run is left untouched."""
    import shutil

    out_dir = new_run_dir(SUITE, out_dir)
    (out_dir / "manifest.json").unlink(missing_ok=True)  # an older run there: no manifest until done
    for f in sorted(run_dir.iterdir()):
        if f.name in _RENDERED:
            continue
        if f.is_dir():
            shutil.copytree(f, out_dir / f.name, dirs_exist_ok=True)
        else:
            shutil.copy2(f, out_dir / f.name)
    if recheck is not None:  # the copied records get the new checks (records.parquet is then stale, unused)
        from carebench.datasets.prompts import load_prompts
        from carebench.plural.routing import recheck_records

        recheck_records(out_dir, load_prompts(out_dir / "prompts.jsonl"), recheck[1], recheck[0])
    scoring = manifest["scoring"]
    manifest = {**manifest, "rescored_from": {
        "run": str(run_dir), "created": manifest.get("created"),
        "judges": list(scoring.get("judges") or []),
        "judges_kept": list(scoring.get("scored_judges") or scoring.get("judges") or [])}}
    metrics = rerender(out_dir, RunCommand(), manifest=manifest)
    write_json(out_dir / "manifest.json", manifest)
    return metrics


def rescore_plan(run_dir: Path, out_dir: Path | None = None) -> Plan:
    """``plural rescore --dry-run``: what would be re-scored; no model call."""
    files = load_run(Path(run_dir))
    return Plan(SUITE, [], [(f"re-scores {sum(files.columns.response_counts.values())} responses and "
                            f"{len(files.columns)} verdicts of judges {', '.join(files.columns.judge[1])} "
                            f"into {out_dir or run_dir}; rescoring makes no model call")])


# -- calibrate (VEILED-SH, §5.2) ---------------------------------------------------------------


LATER_ROUNDS_NOTE = ("E3's candidates and reflections, E4/E5's guidelines and every fitted method's "
                     "predictions depend on earlier answers: their stages count calls at most and cost "
                     "them at the output cap")


class CalibrateCommand(PluralCommand):
    """``plural calibrate`` on the run skeleton: every method over the fixed folds.

    Methods share one run context, so the budget caps the whole command. A method
    the budget cut short keeps none of its predictions and is marked ``incomplete``;
    methods after it still run from the cache where they can. Selection compares
    every method, so a calibration with an incomplete method scores nothing (its
    metrics say what finished); re-running finishes it from the cache.
    """

    title = "Plural: profile calibration and selection"

    def _prepare(self, run: Run):
        cfg = self.config()
        methods = cfg.method_list()
        taxonomy, contexts = load_vocabulary(cfg.taxonomy, cfg.contexts)
        prompts = load_prompt_file(cfg.prompts)
        check_contexts(prompts, contexts, cfg.prompts)
        cal = load_calibration(prompts, cfg.annotations, taxonomy)
        practitioners = list(cal.practitioners)
        if cfg.practitioners:
            missing = [p for p in cfg.practitioners if p not in cal.practitioners]
            if missing:
                raise CarebenchError(f"unknown practitioner {missing[0]!r} (known: {', '.join(practitioners)})")
            practitioners = [p for p in practitioners if p in cfg.practitioners]
        try:
            folds = sel.make_folds([c.id for c in cal.cases], cfg.folds, cfg.fold_seed)
        except ValueError as e:
            n = len({c.id for c in cal.cases})
            hint = (f"; pass --folds {n} or fewer (VEILED-SH §5.2 uses 5 folds), or annotate more cases"
                    if n >= 2 else "; calibration needs at least two annotated cases")
            raise CarebenchError(f"{e}{hint}") from None
        fits = fold_fits(cal, folds, practitioners)
        model = run.model(cfg.model) if cfg.model and any(m != "E0" for m in methods) else None
        env = Env(model, run, taxonomy, contexts, {p.id: p for p in prompts}, cfg.embedder, cfg.seed,
                  memalign_backend=cfg.memalign_backend or "native")
        return methods, cal, folds, fits, practitioners, env

    def plan(self, run: Run) -> Plan:
        """The zero-shot round (every case, the rubric only) is exact; later rounds depend
        on its answers and are estimated at their output caps."""
        methods, cal, _, fits, _, env = self._prepare(run)
        if env.model is None:
            return Plan(self.name, [], ["E0 makes no model call"])
        first = [Call(env.model, label_request(env.taxonomy, env.contexts, c)) for c in cal.cases]
        counts = later_round_calls(cal, fits)
        return Plan(self.name, [
            stage(run, "zero-shot labels (E1, and the traces of E2, E4, E5)", first),
            *[estimated_stage(m, first, counts[m]) for m in methods if counts.get(m)],
        ], [LATER_ROUNDS_NOTE])

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        methods, cal, folds, fits, practitioners, env = self._prepare(run)
        by_id = env.prompts
        records: list[dict[str, Any]] = []
        for name in methods:
            method = get_method(name)
            env.stage = name
            jobs: list[Any] = []
            try:
                profiles = method.fit(fits, env)
                jobs = [(pr, [by_id[c] for c in folds[d.fold] if c in cal.gold(d.practitioner)])
                        for pr, d in zip(profiles, fits, strict=True)]
                preds = method.predict(jobs, env)
            except CutShort:
                # the predictions of fits that never finished are calls not yet made
                # cut short while fitting: its predictions are calls left, and later fitting
                # rounds depend on answers not yet made (the figure is a lower bound)
                run.mark_incomplete(name, 0 if jobs else sum(len(cal.gold(p)) for p in practitioners),
                                    open_ended=not jobs)
                continue
            for (pr, held), ps in zip(jobs, preds, strict=True):
                records.append(profile_record(pr))
                gold = cal.gold(pr.practitioner)
                for p, pred in zip(held, ps, strict=True):
                    records.append({
                        "type": "prediction", "method": name, "practitioner": pr.practitioner,
                        "archetype": pr.archetype, "fold": pr.fold, "case_id": p.id,
                        "gold": gold[p.id].to_dict(), **pred.to_dict(),
                    })
        settings = {
            "label_space": label_space(env.taxonomy.codes("intent"), env.taxonomy.codes("function"),
                                       env.taxonomy.codes("response")),
            "folds": folds, "fold_seed": cfg.fold_seed, "margin": cfg.margin,
            "min_probability": cfg.min_probability, "bootstrap": cfg.bootstrap, "paired_seed": sel.PAIRED_SEED,
            "methods": methods, "practitioners": {p: cal.practitioners[p] for p in practitioners},
        }
        return Execution(
            records=records, config=asdict(cfg), dataset=dataset_info(cfg, cal),
            seeds={"folds": cfg.fold_seed, "paired_bootstrap": sel.PAIRED_SEED, "methods": cfg.seed},
            models=[cfg.model] if cfg.model else [],
            extra={"kind": "calibrate", "scoring": settings, "embedder": env.embedder_name()},
        )

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        if manifest.get("incomplete"):
            done = Counter(r["method"] for r in records if r["type"] == "prediction")
            return incomplete_metrics(manifest, {f"{m} predictions": done[m] for m in manifest["scoring"]["methods"]
                                                 if m not in manifest["incomplete"]})
        return score_calibration(records, manifest["scoring"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.calibration_report import calibration_report

        return calibration_report(dict(manifest), dict(metrics), records)

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.report import calibration_headline

        return calibration_headline(metrics)


def run_calibrate(cfg: ProfileCalibrationConfig, cache: Any = None) -> Path | Plan:
    """Run (or plan) ``plural calibrate``; a budget stop raises RunStopped after writing."""
    return run_plural_command(CalibrateCommand(cfg), cfg, "calibrate", cache)


# -- freeze, label and the release (VEILED-SH, §5.2) -------------------------------------------


class FreezeCommand(PluralCommand):
    """``plural freeze`` on the run skeleton. A method the budget cut short is marked
    ``incomplete`` and no profile file is written (a partial set of profiles would make
    a release with profiles missing); re-running finishes it from the cache."""

    title = "Plural: frozen profiles"

    def _prepare(self, run: Run):
        cfg = self.config()
        cal_metrics: dict[str, Any] = {}
        cal_man: dict[str, Any] = {}
        if cfg.calibration:
            cal_man = read_json(Path(cfg.calibration) / "manifest.json")
            if cal_man.get("suite") != "plural" or cal_man.get("kind") != "calibrate":
                raise CarebenchError(f"{cfg.calibration} is not a `plural calibrate` run directory")
            if cal_man.get("incomplete"):
                raise CarebenchError(f"{cfg.calibration}: the calibration is incomplete "
                                     f"({', '.join(cal_man['incomplete'])} cut short by its budget); "
                                     "re-run it to finish it from the cache")
            cal_metrics = read_json(Path(cfg.calibration) / "metrics.json")
            cfg.prompts = cfg.prompts if cfg.prompts != "builtin" else cal_man["config"].get("prompts", "builtin")
            cfg.annotations = (cfg.annotations if cfg.annotations != "builtin"
                               else cal_man["config"].get("annotations", "builtin"))
        chosen = {a: s["method"] for a, s in cal_metrics.get("selection", {}).items()}
        chosen.update(method_overrides(cfg.methods))
        model_spec = cfg.model or (cal_man.get("models") or [None])[0]
        taxonomy, contexts = load_vocabulary(cfg.taxonomy, cfg.contexts)
        prompts = load_prompt_file(cfg.prompts)
        check_contexts(prompts, contexts, cfg.prompts)
        cal = load_calibration(prompts, cfg.annotations, taxonomy)
        for arch in cal.by_archetype():
            if arch not in chosen:
                raise CarebenchError(f"no method for the {arch} archetype: give --calibration RUN_DIR or "
                                     f"--method {arch}=E4")
            m = chosen[arch]
            if m not in METHOD_ORDER:
                raise CarebenchError(f"unknown method {m!r} for {arch} (choose from {', '.join(METHOD_ORDER)})")
            if not get_method(m).freezable:
                raise CarebenchError(f"{m} cannot be frozen: it only sets the selection margin (VEILED-SH, §5.2)")
        if not model_spec:
            raise CarebenchError("give --model (the shared judge the profiles call)")
        # the calibration run's E4/E5 backend unless overridden: the selection was made with it
        backend = cfg.memalign_backend or cal_man.get("config", {}).get("memalign_backend")
        cfg.memalign_backend = check_backend(backend, needed=bool({"E4", "E5"} & set(chosen.values())))
        fits = [FitData(p, a, [c for c in cal.cases if c.id in cal.gold(p)], cal.gold(p), cal.notes(p))
                for p, a in cal.practitioners.items()]
        env = Env(run.model(model_spec), run, taxonomy, contexts, {p.id: p for p in prompts}, cfg.embedder,
                  cfg.seed, memalign_backend=cfg.memalign_backend)
        return cal, cal_metrics, chosen, model_spec, fits, env

    def plan(self, run: Run) -> Plan:
        cal, _, chosen, _, fits, env = self._prepare(run)
        used = set(chosen.values())
        first = [Call(env.model, label_request(env.taxonomy, env.contexts, c)) for c in cal.cases]
        per_compile = METRIC_CALLS + METRIC_CALLS // MINIBATCH
        later = {"E3": per_compile, "E4": 1, "E5": 2}  # per fit, after the zero-shot traces
        native = env.memalign_backend == "native"  # MLflow's MemAlign distils from the labels alone
        traced = {"E2", "E4", "E5"} if native else {"E2"}
        stages = [stage(run, "zero-shot traces (E2, E4, E5)", first)] if used & traced else []
        for m in sorted(used & set(later), key=METHOD_ORDER.index):
            n = later[m] * sum(chosen[f.archetype] == m for f in fits) + (len(cal.cases) if m == "E5" and native else 0)
            stages.append(estimated_stage(m, first, n))
        return Plan(self.name, stages, [f"profiles: {', '.join(f'{a}={m}' for a, m in sorted(chosen.items()))}",
                                        ("fitting rounds after the zero-shot traces depend on its answers: "
                                        "their stages count calls at most and cost them at the output cap")])

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        cal, cal_metrics, chosen, model_spec, fits, env = self._prepare(run)
        alias = aliases(cal.practitioners)
        profiles: list[Profile] = []
        for m in sorted(set(chosen.values()), key=METHOD_ORDER.index):
            group = [f for f in fits if chosen[f.archetype] == m]
            env.stage = m
            try:
                profiles += get_method(m).fit(group, env)
            except CutShort:
                run.mark_incomplete(m, open_ended=True)  # later fitting rounds depend on its answers
        records = []
        frozen: dict[str, dict[str, Any]] = {}
        for pr in sorted(profiles, key=lambda p: alias[p.practitioner]):
            pr.alias = alias[pr.practitioner]
            pr.calibration_cases = [c.id for c in cal.cases]  # skipped cases too (leakage)
            arch_m = cal_metrics.get("methods", {}).get(pr.method, {}).get("archetypes", {}).get(pr.archetype, {})
            pr.extra["fold_scores"] = {
                "practitioner_out_of_fold_macro_f1": arch_m.get("practitioners", {}).get(pr.practitioner),
                "archetype_fold_macro_f1": arch_m.get("fold_macro_f1"),
                "archetype_macro_f1": arch_m.get("macro_f1"),
            }
            h = pr.content_hash()
            frozen[pr.alias] = {**pr.to_dict(), "hash": h}
            records.append({"type": "profile", "alias": pr.alias, "archetype": pr.archetype, "method": pr.method,
                            "model": pr.model, "hash": h, "fit_cases": len(pr.fit_cases),
                            "guidelines": len(pr.guidelines) + len(pr.guidelines_interpret),
                            "demos": len(pr.demos), "fold_scores": pr.extra["fold_scores"],
                            "fit_warnings": sorted(k for k in pr.extra if k.startswith("distill_error"))})

        def write_profiles(run_dir: Path) -> None:
            for a, d in frozen.items():
                write_json(run_dir / "profiles" / f"{a}.json", d)

        return Execution(
            records=records, config=asdict(cfg), dataset=dataset_info(cfg, cal),  # type: ignore[arg-type]
            seeds={"methods": cfg.seed}, models=[model_spec],
            extra={"kind": "freeze", "methods": chosen, "calibration": cfg.calibration},
            artifacts=None if run.incomplete else write_profiles,
        )

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        if manifest.get("incomplete"):
            return incomplete_metrics(manifest, {"profiles fitted (not written)": len(records)})
        return {"profiles": {r["alias"]: {k: r[k] for k in ("archetype", "method", "hash", "fit_cases")}
                             for r in records}}

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.release_report import freeze_report

        return freeze_report(dict(manifest), dict(metrics), records)


def run_freeze(cfg: FreezeConfig, cache: Any = None) -> Path | Plan:
    return run_plural_command(FreezeCommand(cfg), cfg, "freeze", cache)


class LabelCommand(PluralCommand):
    """``plural label`` on the run skeleton: every profile labels every prompt outside the
    leakage set. A profile method the budget cut short is marked ``incomplete`` and no
    release is written (a release with a profile's policies missing would be wrong)."""

    title = "Plural: scale-out and release"

    def _prepare(self, run: Run):
        cfg = self.config()
        profiles = load_profiles(cfg.profiles)
        taxonomy, contexts = load_vocabulary(cfg.taxonomy, cfg.contexts)
        prompts = load_prompt_file(cfg.prompts)
        check_contexts(prompts, contexts, cfg.prompts)
        by_id = {p.id: p for p in prompts}
        # every calibration case, not only those a profile learnt from: a case every
        # practitioner skipped was still part of the calibration set
        cal_ids = {c for pr in profiles for c in [*pr.fit_cases, *pr.calibration_cases]}
        missing = sorted({c for pr in profiles for c in pr.fit_cases} - set(by_id))
        if missing:
            raise CarebenchError(f"{cfg.prompts}: calibration case {missing[0]!r} of the profiles is not among "
                                 "the prompts (the profiles' memories need it)")
        leak = leakage_exclusions(prompts, cal_ids)
        todo = [p for p in prompts if p.id not in leak.excluded]
        model_spec = cfg.model or profiles[0].model
        env = Env(run.model(model_spec), run, taxonomy, contexts, by_id, cfg.embedder, cfg.seed)
        return profiles, prompts, leak, todo, model_spec, env

    def plan(self, run: Run) -> Plan:
        profiles, prompts, leak, todo, _, env = self._prepare(run)
        like = [Call(env.model, label_request(env.taxonomy, env.contexts, p)) for p in todo]
        n = len(todo) * sum(2 if pr.method == "E5" else 1 for pr in profiles)
        return Plan(self.name, [estimated_stage("labels", like, n)], [
            f"profiles: {', '.join(pr.alias or '?' for pr in profiles)}",
            f"{len(prompts)} prompts, {leak.arithmetic()} excluded for leakage, {len(todo)} to label",
            ("label requests carry each profile's demonstrations, guidelines or memories: calls are "
            "counted at most and costed like zero-shot requests at the output cap"),
        ])

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        profiles, prompts, leak, todo, model_spec, env = self._prepare(run)
        release_dir = Path(cfg.release) if cfg.release else None
        records = []
        for m in METHOD_ORDER:
            group = [pr for pr in profiles if pr.method == m]
            if not group:
                continue
            env.stage = m
            try:
                preds = get_method(m).predict([(pr, todo) for pr in group], env)
            except CutShort:
                run.mark_incomplete(m, open_ended=m == "E5")  # E5's judge B follows judge A's answers
                continue
            for pr, ps in zip(group, preds, strict=True):
                for p, pred in zip(todo, ps, strict=True):
                    records.append({"type": "policy", "prompt_id": p.id, "profile": pr.alias,
                                    "archetype": pr.archetype, "method": pr.method, **pred.to_dict()})
        illustrative = is_builtin(cfg.prompts)

        def release(run_dir: Path) -> None:
            metrics = label_metrics(records, leak, len(prompts))
            write_release(release_dir or run_dir / "release", prompts, profiles, records, metrics, illustrative)

        return Execution(
            records=records, config=asdict(cfg),
            dataset={"prompts": cfg.prompts, "prompts_sha256": file_sha256(resolve(cfg.prompts, "prompts.jsonl")),
                     "illustrative": illustrative, "profiles": cfg.profiles, "n_prompts": len(prompts),
                     "profile_hashes": {pr.alias: pr.content_hash() for pr in profiles}},
            seeds={"methods": cfg.seed}, models=[model_spec],
            extra={"kind": "label", "release": str(release_dir) if release_dir else "release",
                   "leakage": asdict(leak)},
            artifacts=None if run.incomplete else release,
        )

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        if manifest.get("incomplete"):
            return incomplete_metrics(manifest, {"policies": len(records)})
        lk = manifest["leakage"]
        return label_metrics(records, Leakage(lk["calibration"], lk["siblings"]), int(manifest["dataset"]["n_prompts"]))

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.release_report import label_report

        return label_report(dict(manifest), dict(metrics))


def run_label(cfg: LabelConfig, cache: Any = None) -> Path | Plan:
    return run_plural_command(LabelCommand(cfg), cfg, "label", cache)


# -- agreement (VEILED-SH, Appendix C) ---------------------------------------------------------


class AgreementCommand(PluralCommand):
    """``plural agreement`` on the run skeleton (no model call)."""

    title = "Plural: label distributions and agreement"

    def _prepare(self) -> tuple[list[dict[str, Any]], dict[str, Any], list[str]]:
        cfg = self.config()
        taxonomy, _ = load_vocabulary(cfg.taxonomy, None)
        records, meta = agreement_records(Path(cfg.release), cfg.annotations)
        labels = label_space(taxonomy.codes("intent"), taxonomy.codes("function"), taxonomy.codes("response"))
        return records, meta, labels

    def plan(self, run: Run) -> Plan:
        records, _, labels = self._prepare()
        return Plan(self.name, [], [(f"compares {len(records)} label sets over {len(labels)} labels; "
                                    "agreement makes no model call")])

    def execute(self, run: Run) -> Execution:
        cfg = self.cfg
        records, meta, labels = self._prepare()
        release = Path(cfg.release)
        dataset = {"release": str(release), "policies_sha256": file_sha256(release / "policies.jsonl"),
                   "annotations": cfg.annotations,
                   "annotations_sha256": file_sha256(resolve(cfg.annotations, "annotations.jsonl")),
                   "illustrative": bool(meta.get("illustrative")) or is_builtin(cfg.annotations)}
        return Execution(records=records, config=asdict(cfg), dataset=dataset, seeds={}, models=[],
                         extra={"kind": "agreement", "scoring": {"label_space": labels}})

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return agreement_metrics(records, manifest["scoring"]["label_space"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.release_report import agreement_report

        return agreement_report(dict(manifest), dict(metrics))


def run_agreement(cfg: AgreementConfig) -> Path | Plan:
    return run_plural_command(AgreementCommand(cfg), cfg, "agreement")
