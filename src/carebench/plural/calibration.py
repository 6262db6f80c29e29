"""``carebench plural calibrate``: every method over five fixed folds, Table 5, selection.

For each method, each practitioner and each fold, the method is fit on the
practitioner's labels of the fold's 24 calibration cases and predicts the 6
held-out cases (VEILED-SH, §5.2). Every prediction (including failures, which
score as empty label sets) and every fitted state is a record; metrics.json,
Table 5 and the selection are recomputed from the records alone by
:func:`score_calibration`, so re-rendering reproduces them exactly. This module
holds the config, the folds' fits and the scoring; the command object
(:class:`~carebench.plural.commands.calibrate.CalibrateCommand`) is in :mod:`carebench.plural.commands`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from carebench.engine.rundir import data_sha256, file_sha256
from carebench.plural import selection as sel
from carebench.plural.data import Calibration, is_builtin, resolve
from carebench.plural.policy import Policy
from carebench.plural.profiles import METHODS, FitData
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.runs import CommandOptions
from carebench.stats import mean_pairwise_jaccard
from carebench.types import CarebenchError

METHOD_ORDER = tuple(METHODS)


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


def dataset_info(cfg: ProfileCalibrationConfig, cal: Calibration) -> dict[str, Any]:
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


def profile_record(pr: Any) -> dict[str, Any]:
    """The record of one fitted profile (its state, without the practitioner's labels)."""
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
