"""``plural freeze``: the selected profiles fitted on all calibration data and written as a release
(VEILED-SH §5.2)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carebench.engine.run import Run
from carebench.engine.rundir import read_json, write_json
from carebench.engine.runner import Call
from carebench.engine.skeleton import Execution, Plan, incomplete_metrics, stage
from carebench.plural.calibration import METHOD_ORDER, dataset_info
from carebench.plural.data import (
    check_contexts,
    load_calibration,
    load_prompt_file,
    load_vocabulary,
)
from carebench.plural.profiles import FitData, Profile, get_method
from carebench.plural.profiles.base import Env
from carebench.plural.profiles.gepa_light import METRIC_CALLS, MINIBATCH
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.prompting import label_request
from carebench.plural.release import FreezeConfig, aliases, method_overrides
from carebench.plural.runs import CutShort, PluralCommand, estimated_stage, run_plural_command
from carebench.report import Report
from carebench.types import CarebenchError


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
            records=records, config=cfg.manifest_config(), dataset=dataset_info(cfg, cal),  # type: ignore[arg-type]
            seeds={"methods": cfg.seed}, models=[str(model_spec)],
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

    def headline(self, metrics: Mapping[str, Any], records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.release_report import freeze_headline

        return freeze_headline(dict(manifest), dict(metrics), records)


def run_freeze(cfg: FreezeConfig, cache: Any = None) -> Path | Plan:
    return run_plural_command(FreezeCommand(cfg), cfg, "freeze", cache)
