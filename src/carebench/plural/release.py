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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from carebench.experiment import Execution, Plan, incomplete_metrics, stage
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
from carebench.plural.profiles.base import Env
from carebench.plural.profiles.gepa_light import METRIC_CALLS, MINIBATCH
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
from carebench.rundir import file_sha256, read_json, write_json, write_jsonl
from carebench.runner import Call
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
class FreezeConfig(CommandOptions):
    calibration: str | None = None  # a calibrate run directory (selection and fold scores)
    methods: list[str] = field(default_factory=list)  # ARCHETYPE=METHOD overrides
    prompts: str = "builtin"
    annotations: str = "builtin"


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
            records=records, config=asdict(cfg), dataset=_dataset_info(cfg, cal),  # type: ignore[arg-type]
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
    """The calibration prompts and every other prompt made from the same original post
    (``source_id``, see :class:`carebench.datasets.prompts.PromptRecord`)."""
    sources = {p.source_id for p in prompts if p.id in calibration_ids}
    cal = sorted(p.id for p in prompts if p.id in calibration_ids)
    sib = sorted(p.id for p in prompts if p.source_id in sources and p.id not in calibration_ids)
    return Leakage(cal, sib)


_MISSING_SEVERITY = re.compile(r"severity is required")


def drop_reason(error: str | None) -> str:
    return "missing severity" if error and _MISSING_SEVERITY.search(error) else "failed interpretation"


@dataclass
class LabelConfig(CommandOptions):
    profiles: str = ""
    prompts: str = "builtin"
    release: str | None = None  # default RUN_DIR/release


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
