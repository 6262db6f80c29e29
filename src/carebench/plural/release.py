"""``plural freeze`` and ``plural label``: frozen profiles, scale-out and the release.

Freeze (VEILED-SH, §5.2): the method selected for an archetype is refit once
per practitioner on every calibration case they labelled; profiles get neutral
aliases (P1-P3 for peer support, C1-C3 for clinicians, in practitioner-name
order) and a content hash.

Label: every prompt is labelled by every profile except the calibration prompts
and every prompt sharing their ``source_id`` (the leakage rule, reported as
"30 + 18 = 48"). A prompt with a failed interpretation or a missing severity
under any profile is dropped and counted. The release holds metadata and one
label set per profile; identity mapping, raw practitioner labels, rationales and
memories go to ``private/`` (withheld).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from carebench.fileio import atomic_write_text
from carebench.plural.calibration import METHOD_ORDER, _dataset_info
from carebench.plural.data import (
    check_contexts,
    is_builtin,
    load_calibration,
    load_prompt_file,
    load_vocabulary,
    resolve,
)
from carebench.plural.profiles import FitData, Profile, get_method
from carebench.plural.profiles.memalign_mlflow import check_backend
from carebench.plural.runs import RunOptions, close_env, manifest, open_env, write_calls
from carebench.rundir import (
    file_sha256,
    new_run_dir,
    read_json,
    read_jsonl,
    write_json,
    write_jsonl,
)
from carebench.types import CarebenchError

ALIAS_PREFIX = {"peer": "P", "clinician": "C"}
PRIVATE = "private"


def _pairs(values: list[str] | None) -> dict[str, str]:
    out = {}
    for v in values or []:
        k, sep, m = v.partition("=")
        if not sep or not k or not m:
            raise CarebenchError(f"--method expects ARCHETYPE=METHOD (e.g. peer=E5), got {v!r}")
        out[k.strip()] = m.strip().upper()
    return out


def aliases(practitioners: dict[str, str]) -> dict[str, str]:
    """practitioner -> alias: P1.. for peers, C1.. for clinicians, in name order."""
    out, counts = {}, Counter()
    for prac in sorted(practitioners):
        arch = practitioners[prac]
        counts[arch] += 1
        out[prac] = f"{ALIAS_PREFIX.get(arch, arch[:1].upper())}{counts[arch]}"
    return out


# -- freeze ------------------------------------------------------------------------------------


@dataclass
class FreezeConfig(RunOptions):
    calibration: str | None = None  # a calibrate run directory (selection and fold scores)
    methods: list[str] = field(default_factory=list)  # ARCHETYPE=METHOD overrides
    prompts: str = "builtin"
    annotations: str = "builtin"


def run_freeze(cfg: FreezeConfig) -> Path | dict[str, Any]:
    cal_metrics: dict[str, Any] = {}
    cal_man: dict[str, Any] = {}
    if cfg.calibration:
        cal_man = read_json(Path(cfg.calibration) / "manifest.json")
        if cal_man.get("suite") != "plural" or cal_man.get("kind") != "calibrate":
            raise CarebenchError(f"{cfg.calibration} is not a `plural calibrate` run directory")
        cal_metrics = read_json(Path(cfg.calibration) / "metrics.json")
        cfg.prompts = cfg.prompts if cfg.prompts != "builtin" else cal_man["config"].get("prompts", "builtin")
        cfg.annotations = (cfg.annotations if cfg.annotations != "builtin"
                           else cal_man["config"].get("annotations", "builtin"))
    chosen = {a: s["method"] for a, s in cal_metrics.get("selection", {}).items()}
    chosen.update(_pairs(cfg.methods))
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
    alias = aliases(cal.practitioners)
    fits = [FitData(p, a, [c for c in cal.cases if c.id in cal.gold(p)], cal.gold(p), cal.notes(p))
            for p, a in cal.practitioners.items()]
    if cfg.dry_run:
        return {"profiles": {alias[f.practitioner]: chosen[f.archetype] for f in fits},
                "model": model_spec, "fits": len(fits),
                "note": "fitting calls depend on earlier answers; see `plural calibrate --dry-run`"}
    run_dir = new_run_dir("plural-freeze", cfg.out)
    config = asdict(cfg)
    dataset = _dataset_info(cfg, cal)  # type: ignore[arg-type]
    seeds = {"methods": cfg.seed}

    def write(status: str, env=None) -> None:
        manifest(run_dir, "freeze", config, [model_spec], dataset, seeds, status,
                 {"accounting": env.ledger.accounting() if env is not None else {}, "methods": chosen,
                  "calibration": cfg.calibration})

    write("running")
    env = open_env(cfg, taxonomy, contexts, {p.id: p for p in prompts}, model_spec)
    profiles: list[Profile] = []
    try:
        for m in sorted(set(chosen.values()), key=METHOD_ORDER.index):
            group = [f for f in fits if chosen[f.archetype] == m]
            if group:
                profiles += get_method(m).fit(group, env)
    except CarebenchError:
        write_calls(run_dir, env)
        write("stopped", env)
        raise
    finally:
        close_env(env)
    records = []
    pdir = run_dir / "profiles"
    for pr in sorted(profiles, key=lambda p: alias[p.practitioner]):
        pr.alias = alias[pr.practitioner]
        arch_m = cal_metrics.get("methods", {}).get(pr.method, {}).get("archetypes", {}).get(pr.archetype, {})
        pr.extra["fold_scores"] = {
            "practitioner_out_of_fold_macro_f1": arch_m.get("practitioners", {}).get(pr.practitioner),
            "archetype_fold_macro_f1": arch_m.get("fold_macro_f1"),
            "archetype_macro_f1": arch_m.get("macro_f1"),
        }
        h = pr.content_hash()
        write_json(pdir / f"{pr.alias}.json", {**pr.to_dict(), "hash": h})
        records.append({"type": "profile", "alias": pr.alias, "archetype": pr.archetype, "method": pr.method,
                        "model": pr.model, "hash": h, "fit_cases": len(pr.fit_cases),
                        "guidelines": len(pr.guidelines) + len(pr.guidelines_interpret),
                        "demos": len(pr.demos), "fold_scores": pr.extra["fold_scores"],
                        "fit_warnings": sorted(k for k in pr.extra if k.startswith("distill_error"))})
    write_calls(run_dir, env)
    write_jsonl(run_dir / "records.jsonl", records)
    write("complete", env)
    rescore_freeze(run_dir)
    return run_dir


def rescore_freeze(run_dir: Path) -> dict[str, Any]:
    from carebench.plural.release_report import freeze_report
    from carebench.report.writer import write_report

    man = read_json(run_dir / "manifest.json")
    records = read_jsonl(run_dir / "records.jsonl")
    metrics = {"profiles": {r["alias"]: {k: r[k] for k in ("archetype", "method", "hash", "fit_cases")}
                            for r in records}}
    write_json(run_dir / "metrics.json", metrics)
    write_report(freeze_report(man, metrics, records), run_dir)
    return metrics


def load_profiles(path: str | Path) -> list[Profile]:
    """Frozen profiles of a freeze run directory (or its profiles/ folder), checked against their hash."""
    root = Path(path)
    pdir = root / "profiles" if (root / "profiles").is_dir() else root
    files = sorted(pdir.glob("*.json"))
    if not files:
        raise CarebenchError(f"{path}: no frozen profiles (run `carebench plural freeze` first)")
    out = []
    for f in files:
        d = read_json(f)
        h = d.pop("hash", None)
        try:
            pr = Profile.from_dict(d)
        except TypeError as e:
            raise CarebenchError(f"{f}: not a frozen profile ({e})") from None
        if h != pr.content_hash():
            raise CarebenchError(f"{f}: content does not match its hash (edited after freezing?)")
        out.append(pr)
    return out


# -- label, scale-out and release ----------------------------------------------------------------


@dataclass
class Leakage:
    calibration: list[str]
    siblings: list[str]

    @property
    def excluded(self) -> set[str]:
        return set(self.calibration) | set(self.siblings)

    def arithmetic(self) -> str:
        n, s = len(self.calibration), len(self.siblings)
        return f"{n} + {s} = {n + s}"


def leakage_exclusions(prompts: list[Any], calibration_ids: set[str]) -> Leakage:
    """The calibration prompts and every other prompt sharing one of their source ids."""
    sources = {p.source_id for p in prompts if p.id in calibration_ids}
    cal = sorted(p.id for p in prompts if p.id in calibration_ids)
    sib = sorted(p.id for p in prompts if p.source_id in sources and p.id not in calibration_ids)
    return Leakage(cal, sib)


_MISSING_SEVERITY = re.compile(r"severity is required")


def drop_reason(error: str | None) -> str:
    return "missing severity" if error and _MISSING_SEVERITY.search(error) else "failed interpretation"


@dataclass
class LabelConfig(RunOptions):
    profiles: str = ""
    prompts: str = "builtin"
    release: str | None = None  # default RUN_DIR/release


def run_label(cfg: LabelConfig) -> Path | dict[str, Any]:
    profiles = load_profiles(cfg.profiles)
    taxonomy, contexts = load_vocabulary(cfg.taxonomy, cfg.contexts)
    prompts = load_prompt_file(cfg.prompts)
    check_contexts(prompts, contexts, cfg.prompts)
    by_id = {p.id: p for p in prompts}
    cal_ids = {c for pr in profiles for c in pr.fit_cases}
    missing = sorted(cal_ids - set(by_id))
    if missing:
        raise CarebenchError(f"{cfg.prompts}: calibration case {missing[0]!r} of the profiles is not among "
                             "the prompts (the profiles' memories need it)")
    leak = leakage_exclusions(prompts, cal_ids)
    todo = [p for p in prompts if p.id not in leak.excluded]
    model_spec = cfg.model or profiles[0].model
    if cfg.dry_run:
        return {"profiles": [pr.alias for pr in profiles], "prompts": len(prompts),
                "excluded_for_leakage": leak.arithmetic(), "to_label": len(todo),
                "calls_at_most": len(todo) * sum(2 if pr.method == "E5" else 1 for pr in profiles),
                "model": model_spec}
    run_dir = new_run_dir("plural-label", cfg.out)
    release_dir = Path(cfg.release) if cfg.release else run_dir / "release"
    config = asdict(cfg)
    dataset = {"prompts": cfg.prompts, "prompts_sha256": file_sha256(resolve(cfg.prompts, "prompts.jsonl")),
               "illustrative": is_builtin(cfg.prompts), "profiles": cfg.profiles, "n_prompts": len(prompts),
               "profile_hashes": {pr.alias: pr.content_hash() for pr in profiles}}

    def write(status: str, env=None) -> None:
        manifest(run_dir, "label", config, [model_spec], dataset, {"methods": cfg.seed}, status,
                 {"accounting": env.ledger.accounting() if env is not None else {},
                  "release": str(release_dir), "leakage": asdict(leak)})

    write("running")
    env = open_env(cfg, taxonomy, contexts, by_id, model_spec)
    records = []
    try:
        for m in METHOD_ORDER:
            group = [pr for pr in profiles if pr.method == m]
            if not group:
                continue
            preds = get_method(m).predict([(pr, todo) for pr in group], env)
            for pr, ps in zip(group, preds, strict=True):
                for p, pred in zip(todo, ps, strict=True):
                    records.append({"type": "policy", "prompt_id": p.id, "profile": pr.alias,
                                    "archetype": pr.archetype, "method": pr.method, **pred.to_dict()})
    except CarebenchError:
        write_calls(run_dir, env)
        write_jsonl(run_dir / "records.jsonl", records)
        write("stopped", env)
        raise
    finally:
        close_env(env)
    write_calls(run_dir, env)
    write_jsonl(run_dir / "records.jsonl", records)
    metrics = label_metrics(records, leak, len(prompts))
    write_release(release_dir, prompts, profiles, records, metrics, dataset["illustrative"])
    write("complete", env)
    rescore_label(run_dir)
    return run_dir


def label_metrics(records: list[dict[str, Any]], leak: Leakage, n_prompts: int) -> dict[str, Any]:
    labelled = sorted({r["prompt_id"] for r in records})
    reasons: dict[str, set[str]] = defaultdict(set)
    per_profile: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        per_profile[r["profile"]]["labelled"] += 1
        if r["policy"] is None:
            why = drop_reason(r["error"])
            reasons[why].add(r["prompt_id"])
            per_profile[r["profile"]][why] += 1
    dropped = set().union(*reasons.values()) if reasons else set()
    return {
        "prompts": n_prompts,
        "excluded_for_leakage": {"calibration": len(leak.calibration), "sharing_source": len(leak.siblings),
                                 "total": len(leak.excluded), "arithmetic": leak.arithmetic()},
        "labelled": len(labelled),
        "dropped": {"total": len(dropped), **{k: len(v) for k, v in sorted(reasons.items())}},
        "released": len(labelled) - len(dropped),
        "per_profile": {a: dict(c) for a, c in sorted(per_profile.items())},
        "released_ids": sorted(set(labelled) - dropped),
    }


def write_release(release_dir: Path, prompts: list[Any], profiles: list[Profile], records: list[dict[str, Any]],
                  metrics: dict[str, Any], illustrative: bool) -> None:
    """prompts.jsonl, policies.jsonl, metadata.json; private/ holds what is withheld."""
    from carebench.datasets.prompts import write_jsonl as write_rows

    keep = set(metrics["released_ids"])
    order = {pr.alias: i for i, pr in enumerate(sorted(profiles, key=lambda p: p.alias))}
    write_rows(release_dir / "prompts.jsonl", [p for p in prompts if p.id in keep])
    pols = sorted((r for r in records if r["prompt_id"] in keep),
                  key=lambda r: (r["prompt_id"], order[r["profile"]]))
    write_jsonl(release_dir / "policies.jsonl",
                [{"prompt_id": r["prompt_id"], "profile": r["profile"], "archetype": r["archetype"],
                  **r["policy"]} for r in pols])
    write_json(release_dir / "metadata.json", {
        "description": "Profile-generated reference policies (VEILED-SH, §5.2). These labels are neither "
                       "human annotations nor human ground truth.",
        "illustrative": illustrative,
        "profiles": [{"alias": pr.alias, "archetype": pr.archetype, "method": pr.method, "model": pr.model,
                      "hash": pr.content_hash(), "policies": sum(1 for r in pols if r["profile"] == pr.alias)}
                     for pr in sorted(profiles, key=lambda p: p.alias)],
        "counts": {k: metrics[k] for k in ("prompts", "excluded_for_leakage", "labelled", "dropped", "released")},
    })
    priv = release_dir / PRIVATE
    write_json(priv / "identity.json", {pr.alias: pr.practitioner for pr in profiles})
    write_jsonl(priv / "practitioner_labels.jsonl",
                [{"practitioner": pr.practitioner, "profile": pr.alias, "case_id": c, **pol}
                 for pr in profiles for c, pol in sorted(pr.gold.items())])
    write_jsonl(priv / "rationales.jsonl",
                [{"prompt_id": r["prompt_id"], "profile": r["profile"], "rationale": r["rationale"],
                  "error": r["error"]} for r in records])
    write_json(priv / "memories.json", {
        pr.alias: {"instruction": pr.instruction, "guidelines": pr.guidelines,
                   "guidelines_interpret": pr.guidelines_interpret, "demos": pr.demos,
                   "memory_cases": pr.fit_cases} for pr in profiles})
    atomic_write_text(priv / "README.txt",
                      "Withheld from release (VEILED-SH, Ethical Considerations): identity mapping, raw "
                      "practitioner labels, rationales and memories. Do not distribute this folder.\n")


def rescore_label(run_dir: Path) -> dict[str, Any]:
    from carebench.plural.release_report import label_report
    from carebench.report.writer import write_report

    man = read_json(run_dir / "manifest.json")
    records = read_jsonl(run_dir / "records.jsonl")
    lk = man["leakage"]
    metrics = label_metrics(records, Leakage(lk["calibration"], lk["siblings"]), int(man["dataset"]["n_prompts"]))
    write_json(run_dir / "metrics.json", metrics)
    write_report(label_report(man, metrics), run_dir)
    return metrics

