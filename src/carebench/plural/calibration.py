"""``carebench plural calibrate``: every method over five fixed folds, Table 5, selection.

For each method, each practitioner and each fold, the method is fit on the
practitioner's labels of the fold's 24 calibration cases and predicts the 6
held-out cases (VEILED-SH, §5.2). Every prediction (including failures, which
score as empty label sets) and every fitted state is a record; metrics.json,
Table 5 and the selection are recomputed from the records alone by
:func:`score_records`, so re-rendering reproduces them exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.prompting import label_request
from carebench.plural.runs import RunOptions, close_env, manifest, open_env, write_calls
from carebench.rundir import (
    data_sha256,
    file_sha256,
    new_run_dir,
    read_json,
    read_jsonl,
    write_json,
    write_jsonl,
)
from carebench.runner import Call
from carebench.stats import mean_pairwise_jaccard
from carebench.types import CarebenchError

METHOD_ORDER = tuple(METHODS)


@dataclass
class CalibrateConfig(RunOptions):
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


def _dataset_info(cfg: CalibrateConfig, cal: Calibration) -> dict[str, Any]:
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


def run_calibrate(cfg: CalibrateConfig) -> Path | dict[str, Any]:
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
        raise CarebenchError(str(e)) from None
    fits = fold_fits(cal, folds, practitioners)
    labels = label_space(taxonomy.codes("intent"), taxonomy.codes("function"), taxonomy.codes("response"))
    if cfg.dry_run:
        return _dry_run(cfg, methods, cal, fits, taxonomy, contexts)

    run_dir = new_run_dir("plural-calibrate", cfg.out)
    config = {k: v for k, v in asdict(cfg).items()}
    settings = {
        "label_space": labels, "folds": folds, "fold_seed": cfg.fold_seed, "margin": cfg.margin,
        "min_probability": cfg.min_probability, "bootstrap": cfg.bootstrap, "paired_seed": sel.PAIRED_SEED,
        "methods": methods, "practitioners": {p: cal.practitioners[p] for p in practitioners},
    }
    dataset = _dataset_info(cfg, cal)
    seeds = {"folds": cfg.fold_seed, "paired_bootstrap": sel.PAIRED_SEED, "methods": cfg.seed}
    models = [cfg.model] if cfg.model else []

    def write(status: str, env=None, extra: dict[str, Any] | None = None) -> None:
        acct = env.ledger.accounting() if env is not None else {}
        manifest(run_dir, "calibrate", config, models, dataset, seeds, status,
                 {"scoring": settings, "accounting": acct, **(extra or {})})

    write("running")
    by_id = {p.id: p for p in prompts}
    env = open_env(cfg, taxonomy, contexts, by_id, cfg.model or "llamacpp:builtin") if cfg.model else None
    if env is None:  # E0 alone needs no model; the environment then only embeds
        from carebench.plural.calls import Ledger
        from carebench.plural.profiles.base import Env
        from carebench.runner import Runner, RunnerConfig

        env = Env(None, Ledger(Runner(RunnerConfig(use_cache=False, progress=False))), taxonomy, contexts,
                  by_id, cfg.embedder, cfg.seed)
    records: list[dict[str, Any]] = []
    try:
        for name in methods:
            method = get_method(name)
            profiles = method.fit(fits, env)
            jobs = [(pr, [by_id[c] for c in folds[d.fold] if c in d_gold(cal, d.practitioner)])
                    for pr, d in zip(profiles, fits, strict=True)]
            preds = method.predict(jobs, env)
            for (pr, held), ps in zip(jobs, preds, strict=True):
                records.append(_profile_record(pr))
                gold = cal.gold(pr.practitioner)
                for p, pred in zip(held, ps, strict=True):
                    records.append({
                        "type": "prediction", "method": name, "practitioner": pr.practitioner,
                        "archetype": pr.archetype, "fold": pr.fold, "case_id": p.id,
                        "gold": gold[p.id].to_dict(), **pred.to_dict(),
                    })
    except CarebenchError:
        write_calls(run_dir, env)
        write_jsonl(run_dir / "records.jsonl", records)
        write("stopped", env)
        raise
    finally:
        if env.model is not None:
            close_env(env)
    write_calls(run_dir, env)
    write_jsonl(run_dir / "records.jsonl", records)
    write("complete", env, {"embedder": env.embedder_name()})
    rescore(run_dir)
    return run_dir


def d_gold(cal: Calibration, practitioner: str) -> dict[str, Policy]:
    return cal.gold(practitioner)


def _profile_record(pr: Any) -> dict[str, Any]:
    d = pr.to_dict()
    d.pop("gold")  # the practitioner's labels are in the prediction records' gold fields
    return {"type": "profile", **d}


def _dry_run(cfg, methods, cal, fits, taxonomy, contexts) -> dict[str, Any]:
    """The first round (zero-shot labels of every case) can be checked against the cache;
    later rounds depend on the answers, so they are counted, not planned."""
    out: dict[str, Any] = {
        "methods": methods, "practitioners": len({f.practitioner for f in fits}), "fits": len(fits),
        "calibration_cases": len(cal.cases),
    }
    from carebench.plural.profiles.gepa_light import METRIC_CALLS, MINIBATCH

    n_held = sum(len(cal.gold(p)) for p in {f.practitioner for f in fits})  # each rated case held out once
    per_compile = METRIC_CALLS + METRIC_CALLS // MINIBATCH  # evaluations + at most one reflection each round
    counts = {"E0": 0, "E1": len(cal.cases), "E2": len(cal.cases) + n_held,
              "E3": len(fits) * per_compile + n_held, "E4": len(cal.cases) + len(fits) + n_held,
              "E5": 2 * len(cal.cases) + 2 * len(fits) + 2 * n_held}
    out["calls_about"] = {m: counts[m] for m in methods}
    if cfg.model and any(m != "E0" for m in methods):
        opts = RunOptions(**{k: getattr(cfg, k) for k in RunOptions.__dataclass_fields__})
        env = open_env(opts, taxonomy, contexts, {c.id: c for c in cal.cases}, cfg.model)
        try:
            plan = env.ledger.plan([Call(env.model, label_request(taxonomy, contexts, c)) for c in cal.cases])
        finally:
            close_env(env)
        out["zero_shot_round"] = {"calls": plan.total, "cached": plan.cached, "to_make": plan.to_make,
                                  "estimated_cost_usd": plan.estimated_cost_usd}
    out["note"] = ("E3's reflections, E4/E5's guidelines and every prediction prompt depend on earlier "
                   "answers, so only the zero-shot round is checked against the cache")
    return out


# -- scoring from records alone ---------------------------------------------------------------


def _sets(rows: list[dict[str, Any]], key: str) -> dict[str, frozenset[str] | None]:
    out = {}
    for r in rows:
        v = r.get(key)
        out[r["case_id"]] = None if v is None else Policy.of(v).labels()
    return out


def score_records(records: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
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


def rescore(run_dir: Path) -> dict[str, Any]:
    """Recompute metrics.json and the report from records.jsonl and the manifest."""
    run_dir = Path(run_dir)
    man = read_json(run_dir / "manifest.json")
    records = read_jsonl(run_dir / "records.jsonl")
    metrics = score_records(records, man["scoring"])
    write_json(run_dir / "metrics.json", metrics)
    from carebench.plural.calibration_report import calibration_report
    from carebench.report.writer import write_report

    write_report(calibration_report(man, metrics, records), run_dir)
    return metrics
