"""``plural calibrate``: every profile method over the fixed folds, then selection (VEILED-SH §5.2)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.engine.skeleton import Execution, Plan, incomplete_metrics, stage
from carebench.plural import selection as sel
from carebench.plural.calibration import (
    ProfileCalibrationConfig,
    dataset_info,
    fold_fits,
    later_round_calls,
    profile_record,
    score_calibration,
)
from carebench.plural.data import (
    check_contexts,
    load_calibration,
    load_prompt_file,
    load_vocabulary,
)
from carebench.plural.policy import label_space
from carebench.plural.profiles import get_method
from carebench.plural.profiles.base import Env
from carebench.plural.prompting import label_request
from carebench.plural.runs import CutShort, PluralCommand, estimated_stage, run_plural_command
from carebench.report import Report
from carebench.types import CarebenchError

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
            records=records, config=cfg.manifest_config(), dataset=dataset_info(cfg, cal),
            seeds={"folds": cfg.fold_seed, "paired_bootstrap": sel.PAIRED_SEED, "methods": cfg.seed},
            models=[str(cfg.model)] if cfg.model else [],
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
