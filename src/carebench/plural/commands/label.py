"""``plural label``: a frozen release's profiles label new prompts (VEILED-SH §5.2)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from carebench.engine.run import Run
from carebench.engine.rundir import file_sha256
from carebench.engine.runner import Call
from carebench.engine.skeleton import Execution, Plan, incomplete_metrics
from carebench.plural.calibration import METHOD_ORDER
from carebench.plural.data import (
    check_contexts,
    is_builtin,
    load_prompt_file,
    load_vocabulary,
    resolve,
)
from carebench.plural.profiles import get_method
from carebench.plural.profiles.base import Env
from carebench.plural.prompting import label_request
from carebench.plural.release import (
    LabelConfig,
    Leakage,
    label_metrics,
    leakage_exclusions,
    load_profiles,
    write_release,
)
from carebench.plural.runs import CutShort, PluralCommand, estimated_stage, run_plural_command
from carebench.report import Report
from carebench.types import CarebenchError


class LabelCommand(PluralCommand):
    """``plural label`` on the run skeleton: every profile labels every prompt outside the
    leakage set. A profile method the budget cut short is marked ``incomplete`` and no
    release is written (a release with a profile's policies missing would be wrong)."""

    title = "Plural: scale-out and release"

    def _prepare(self, run: Run):
        cfg = self.config()
        if cfg.release and Path(cfg.release).exists() and not Path(cfg.release).is_dir():  # before any call
            raise CarebenchError(f"--release {cfg.release} is a file: give a folder for the release")
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
            records=records, config=cfg.manifest_config(),
            dataset={"prompts": cfg.prompts, "prompts_sha256": file_sha256(resolve(cfg.prompts, "prompts.jsonl")),
                     "illustrative": illustrative, "profiles": cfg.profiles, "n_prompts": len(prompts),
                     "profile_hashes": {pr.alias: pr.content_hash() for pr in profiles}},
            seeds={"methods": cfg.seed}, models=[str(model_spec)],
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

    def headline(self, metrics: Mapping[str, Any], records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> Any:
        from carebench.plural.release_report import label_headline

        return label_headline(dict(manifest), dict(metrics))


def run_label(cfg: LabelConfig, cache: Any = None) -> Path | Plan:
    return run_plural_command(LabelCommand(cfg), cfg, "label", cache)
