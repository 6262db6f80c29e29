"""``plural run``: responses, then the jury, on the run skeleton (VEILED-SH §5.3, §6); ``plural rescore``
re-scores its run directories from their records alone."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from carebench.compare.outline import write_outline
from carebench.engine.cache import CompletionCache
from carebench.engine.run import Run
from carebench.engine.rundir import new_run_dir, read_json, refuse_other_kind, write_json
from carebench.engine.runner import call_key
from carebench.engine.skeleton import Execution, Plan, incomplete_metrics, rerender, stage
from carebench.plural.compare import PluralComparer
from carebench.plural.config import (
    JURY_BATCH,
    PluralRunConfig,
    Release,
    archetype_profiles,
    check_release,
    compute_metrics,
    engagement_inputs,
    examples,
    family_warnings,
    load_release,
    load_run,
    select_prompts,
)
from carebench.plural.jury import judgment_records, plan_jury
from carebench.plural.records import PARQUET_COLUMNS, JudgmentRecord, ResponseRecord
from carebench.plural.responses import response_calls, response_records
from carebench.plural.runs import SUITE, PluralCommand, run_plural_command
from carebench.report import Report
from carebench.resources.options import recheck_against
from carebench.types import CarebenchError, Completion, is_harness_failure


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


    def outline(self, run_dir: Path) -> None:
        """``comparison.json``, so leaderboards read this run in full only when they keep a system of it."""
        write_outline(run_dir, PluralComparer())

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
        stages = [stage(run, "responses", pre.calls), stage(run, "jury", jury, exact=known)]
        if cfg.engagement == "judge":  # the replies the pre-filter leaves open, one question per judge
            from carebench.engagement import engagement_question, prefilter_engagement
            from carebench.plural.engagement import replies

            open_ = [r for r in replies(response_records(pre.calls, comps), {p.id: p.text for p in pre.prompts})
                     if prefilter_engagement(r.text, r.status) is None]
            stages.append(stage(run, "engagement", judge_calls(
                [engagement_question(r.key, r.turns) for r in open_], pre.judges,
                temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens), exact=known))
        return Plan(self.name, stages, notes)

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
        classes: dict[Any, Any] = {}
        if not res.not_made:  # asked beside the jury (one batch round for both in batch mode)
            from carebench.plural.engagement import classify_responses

            classes, skipped = classify_responses(responses, {p.id: p.text for p in pre.prompts}, pre.judges, run,
                                                  mode=cfg.engagement, temperature=cfg.judge_temperature,
                                                  max_tokens=cfg.judge_max_tokens)
            if skipped:
                run.mark_incomplete("engagement", skipped)
        elif cfg.engagement == "judge":
            run.mark_incomplete("engagement", open_ended=True)
        config = cfg.manifest_config()
        settings = {
            "categories": pre.taxonomy.codes("response"),
            "empty_policy": cfg.empty_policy,
            "zero_coverage": cfg.zero_coverage,
            "seed": cfg.seed,
            "bootstrap": cfg.bootstrap,
            "alpha": cfg.alpha,
            "judges": [j.label for j in pre.judges],
            "engagement": cfg.engagement,
            "refusal_policy": cfg.refusal_policy,
            # the taxonomy's flagged RESPONSE codes, so a re-score needs no taxonomy file
            "refusal_categories": list(pre.taxonomy.refusal_codes()),
            "critical_categories": list(pre.taxonomy.critical_codes()),
            "harmful_categories": list(pre.taxonomy.harmful_codes()),
        }
        # calls that failed every retry (server down, timeout, HTTP 5xx) make the run incomplete;
        # a permanent rejection (HTTP 4xx) is the request's outcome. Both are left out and counted.
        failures = {"response_calls": sum(r.status == "error" and is_harness_failure(r.error) for r in responses),
                    "jury_calls": sum(v.status == "error" and is_harness_failure(v.rationale) for v in verdicts)}
        from carebench.plural.engagement import with_engagement
        from carebench.plural.routing import with_checks
        from carebench.resources import load_registry

        registry = load_registry(cfg.resources)
        return Execution(
            records=with_engagement(with_checks([r.to_dict() for r in responses], pre.prompts, cfg.locale, registry),
                                    classes)
            + [v.to_dict() for v in _ordered(verdicts)],
            config=config,
            dataset={**pre.release.dataset(), "sampled_prompts": len(pre.prompts)},
            seeds={"bootstrap": cfg.seed, "sample": cfg.sample_seed},
            models=[*map(str, cfg.systems), *[j.label for j in pre.judges]],
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
        from carebench.plural.routing import read_response_rows, routing_block

        settings = dict(manifest.get("scoring") or {})
        rows = read_response_rows(records.path)
        metrics = compute_metrics(records.jury_data(settings.get("scored_judges")), settings,
                                  engagement_inputs(rows, manifest))
        if manifest.get("resources"):
            block = routing_block(records.prompts, rows, manifest)
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


def rescore(run_dir: Path, *, judges: Sequence[str] | None = None, out_dir: Path | None = None,
            B: int | None = None, resources: str | None = None, locale: str | None = None,
            refusal_policy: str | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json`` and the report from the records only (no model call).

    With no overrides it reproduces the run's own metrics exactly (it is what
    ``carebench report`` does); ``judges`` re-scores with a subset of the jury (e.g.
    leaving one judge out) into ``out_dir`` when given; ``refusal_policy`` re-scores
    under that policy from the recorded engagement classes (recorded in the manifest).
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
    if refusal_policy is not None:
        from carebench.engagement.policy import check_refusal_policy

        check_refusal_policy(refusal_policy)  # the recorded classes are re-read: no model call
        scoring["refusal_policy"] = refusal_policy
        if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
            # the run directory's own metrics follow its manifest (carebench report DIR reproduces them)
            write_json(Path(run_dir) / "manifest.json",
                       {**manifest, "scoring": {**(manifest.get("scoring") or {}), "refusal_policy": refusal_policy}})
    rescored = {**manifest, "scoring": scoring}
    # where replies send a person, against another registry
    recheck, block = recheck_against(resources, locale, manifest, run_dir, out_dir, "replies")
    if block is not None:
        rescored["resources"] = block
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        return rerender(run_dir, RunCommand(), manifest=rescored)
    return _rescore_into(Path(run_dir), Path(out_dir), rescored, recheck)


_RENDERED = ("manifest.json", "metrics.json", "report.md", "report.html", "figures")


def _rescore_into(run_dir: Path, out_dir: Path, manifest: dict[str, Any], recheck: Any = None) -> dict[str, Any]:
    """A re-score as a run directory of its own: the source run's records copied unchanged,
    then metrics and the report, then (last) a manifest naming the source run and the judges
    kept, so ``carebench report OUT`` re-renders it and the source run is left untouched."""
    import shutil

    refuse_other_kind(out_dir, manifest.get("kind"))  # e.g. a plural calibrate run given as --out
    out_dir = new_run_dir(SUITE, out_dir, writes=SUITE)
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
