"""``carebench plural calibrate``: every method over five fixed folds, Table 5, selection.

For each method, each practitioner and each fold, the method is fit on the
practitioner's labels of the fold's 24 calibration cases and predicts the 6
held-out cases (VEILED-SH, §5.2). Every prediction (including failures, which
score as empty label sets) and every fitted state is a record; metrics.json,
Table 5 and the selection are recomputed from the records alone by
:func:`score_calibration`, so re-rendering reproduces them exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.experiment import Execution, Plan, incomplete_metrics, stage
from carebench.plural import selection as sel
from carebench.plural.data import (
    Calibration,
    check_contexts,
    is_builtin,
    load_calibration,
    load_prompt_file,
    load_vocabulary,
    resolve,
)
from carebench.plural.policy import Policy, label_space
from carebench.plural.profiles import METHODS, FitData, get_method
from carebench.plural.profiles.base import Env
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.prompting import label_request
from carebench.plural.runs import (
    CommandOptions,
    CutShort,
    PluralCommand,
    estimated_stage,
    run_plural_command,
)
from carebench.report import Report
from carebench.run import Run
from carebench.rundir import data_sha256, file_sha256
from carebench.runner import Call
from carebench.stats import mean_pairwise_jaccard
from carebench.types import CarebenchError

METHOD_ORDER = tuple(METHODS)
LATER_ROUNDS_NOTE = ("E3's candidates and reflections, E4/E5's guidelines and every fitted method's "
                     "predictions depend on earlier answers: their stages count calls at most and cost "
                     "them at the output cap")


@dataclass
class ProfileCalibrationConfig(CommandOptions):
    prompts: str = "builtin"
    annotations: str = "builtin"
    methods: list[str] = field(default_factory=lambda: list(METHOD_ORDER))
    folds: int = sel.N_FOLDS
    fold_seed: int = sel.FOLD_SEED
    margin: float = sel.MARGIN
    min_probability: float = sel.MIN_PROBABILITY
    bootstrap: int = sel.PAIRED_B
    practitioners: list[str] | None = None

    def method_list(self) -> list[str]:
        ms = [m.upper() for m in self.methods]
        unknown = [m for m in ms if m not in METHODS]
        if unknown:
            raise CarebenchError(f"unknown method {unknown[0]!r} (choose from {', '.join(METHODS)})")
        if "E0" not in ms:
            raise CarebenchError("E0 must be among the methods: it sets the selection margin (VEILED-SH, §5.2)")
        if not self.model and any(m != "E0" for m in ms):
            raise CarebenchError("give --model (the shared judge every method except E0 calls)")
        self.memalign_backend = check_backend(self.memalign_backend, needed=bool({"E4", "E5"} & set(ms)))
        return [m for m in METHOD_ORDER if m in ms]


def fold_fits(cal: Calibration, folds: list[list[str]], practitioners: Sequence[str]) -> list[FitData]:
    """One fit per (practitioner, fold): the practitioner's rated cases outside the fold."""
    out = []
    for prac in practitioners:
        gold = cal.gold(prac)
        notes = cal.notes(prac)
        for k, held in enumerate(folds):
            cases = [c for c in cal.cases if c.id not in held and c.id in gold]
            out.append(FitData(prac, cal.practitioners[prac], cases, {c.id: gold[c.id] for c in cases},
                               {c.id: notes[c.id] for c in cases if c.id in notes}, fold=k))
    return out


def _dataset_info(cfg: ProfileCalibrationConfig, cal: Calibration) -> dict[str, Any]:
    def sha(src: str, name: str) -> str:
        return file_sha256(resolve(src, name))

    return {
        "prompts": cfg.prompts, "annotations": cfg.annotations,
        "prompts_sha256": sha(cfg.prompts, "prompts.jsonl"),
        "annotations_sha256": sha(cfg.annotations, "annotations.jsonl"),
        "calibration_cases": len(cal.cases), "practitioners": len(cal.practitioners),
        "illustrative": is_builtin(cfg.prompts) and is_builtin(cfg.annotations),
        "annotations_content_sha256": data_sha256(a.model_dump() for a in cal.annotations),
    }


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
                records.append(_profile_record(pr))
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
            records=records, config=asdict(cfg), dataset=_dataset_info(cfg, cal),
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


def run_calibrate(cfg: ProfileCalibrationConfig, cache: Any = None) -> Path | Plan:
    """Run (or plan) ``plural calibrate``; a budget stop raises RunStopped after writing."""
    return run_plural_command(CalibrateCommand(cfg), cfg, "calibrate", cache)


def _profile_record(pr: Any) -> dict[str, Any]:
    d = pr.to_dict()
    d.pop("gold")  # the practitioner's labels are in the prediction records' gold fields
    return {"type": "profile", **d}


def later_round_calls(cal: Calibration, fits: Sequence[FitData]) -> dict[str, int]:
    """Calls each method makes after the shared zero-shot round, at most (for dry runs)."""
    from carebench.plural.profiles.gepa_light import METRIC_CALLS, MINIBATCH

    n_held = sum(len(cal.gold(p)) for p in {f.practitioner for f in fits})  # each rated case held out once
    per_compile = METRIC_CALLS + METRIC_CALLS // MINIBATCH  # evaluations + at most one reflection each round
    return {"E0": 0, "E1": 0, "E2": n_held, "E3": len(fits) * per_compile + n_held, "E4": len(fits) + n_held,
            "E5": len(cal.cases) + 2 * len(fits) + 2 * n_held}


# -- scoring from records alone ---------------------------------------------------------------


def _sets(rows: list[dict[str, Any]], key: str) -> dict[str, frozenset[str] | None]:
    out = {}
    for r in rows:
        v = r.get(key)
        out[r["case_id"]] = None if v is None else Policy.of(v).labels()
    return out


def score_calibration(records: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """metrics.json from the records: per-method scores, Table 5 comparisons, selection."""
    labels = settings["label_space"]
    pracs: dict[str, str] = settings["practitioners"]
    methods: list[str] = settings["methods"]
    folds: list[list[str]] = settings["folds"]
    preds = [r for r in records if r["type"] == "prediction"]
    cases = sorted({c for f in folds for c in f})
    gold: dict[str, dict[str, frozenset[str] | None]] = {p: dict.fromkeys(cases) for p in pracs}
    for r in preds:
        gold[r["practitioner"]][r["case_id"]] = Policy.of(r["gold"]).labels()
    archetypes = [a for a in ("peer", "clinician") if a in pracs.values()] + sorted(
        {a for a in pracs.values()} - {"peer", "clinician"})
    data: dict[str, dict[str, list[sel.PractitionerData]]] = {}
    out_methods: dict[str, Any] = {}
    for m in methods:
        rows = [r for r in preds if r["method"] == m]
        data[m] = {}
        out_methods[m] = {"archetypes": {}}
        for arch in archetypes:
            members = [p for p, a in pracs.items() if a == arch]
            pdata = []
            per_prac: dict[str, float] = {}
            for p in members:
                mine = [r for r in rows if r["practitioner"] == p]
                d = sel.practitioner_data(cases, gold[p], _sets(mine, "policy"), labels)
                pdata.append(d)
                per_prac[p] = sel.practitioner_score(d)
            data[m][arch] = pdata
            fold_scores = []
            for held in folds:
                vals = []
                for p in members:
                    d = sel.practitioner_data(held, gold[p], _sets([r for r in rows if r["practitioner"] == p], "policy"), labels)
                    if d.rated.any():
                        vals.append(sel.practitioner_score(d))
                fold_scores.append(float(np.nanmean(vals)) if vals else float("nan"))
            arch_rows = [r for r in rows if pracs[r["practitioner"]] == arch]
            out_methods[m]["archetypes"][arch] = {
                "macro_f1": float(np.mean(list(per_prac.values()))),
                "practitioners": per_prac,
                "fold_macro_f1": fold_scores,
                "predictions": len(arch_rows),
                "failed": sum(1 for r in arch_rows if r["policy"] is None),
                "invalid_combination": sum(1 for r in arch_rows if (r.get("error") or "").startswith("invalid")),
            }
    comparisons: dict[str, Any] = {}
    selection: dict[str, Any] = {}
    jaccard: dict[str, Any] = {}
    for arch in archetypes:
        comps = [
            sel.compare_to_floor(m, data[m][arch], data[sel.FLOOR][arch], margin=settings["margin"],
                                 min_probability=settings["min_probability"], B=settings["bootstrap"],
                                 seed=settings["paired_seed"])
            for m in methods if m != sel.FLOOR
        ]
        comparisons[arch] = {c.method: {k: v for k, v in asdict(c).items() if k != "method"} for c in comps}
        fallback = sel.FALLBACK if sel.FALLBACK in methods else None
        s = sel.select_method(arch, comps, fallback=fallback or "E1", margin=settings["margin"],
                              min_probability=settings["min_probability"])
        selection[arch] = {"method": s.method, "qualifying": s.qualifying, "warning": s.warning}
        members = [p for p, a in pracs.items() if a == arch]
        jaccard[arch] = {"practitioners": _jaccard([gold[p] for p in members], cases)}
        if s.method in data:
            sets = [_sets([r for r in preds if r["method"] == s.method and r["practitioner"] == p], "policy")
                    for p in members]
            jaccard[arch]["selected_profiles"] = _jaccard(sets, cases, failed_as_empty=True)
    return {
        "settings": {k: settings[k] for k in ("margin", "min_probability", "bootstrap", "paired_seed",
                                               "fold_seed")},
        "methods": out_methods,
        "comparisons": comparisons,
        "selection": selection,
        "jaccard": jaccard,
    }


def _jaccard(sets: list[dict[str, frozenset[str] | None]], cases: list[str], failed_as_empty: bool = False) -> float:
    if len(sets) < 2:
        return float("nan")
    rows = [[(s.get(c) if s.get(c) is not None else (frozenset() if failed_as_empty and c in s else None))
             for c in cases] for s in sets]
    return mean_pairwise_jaccard(rows)
