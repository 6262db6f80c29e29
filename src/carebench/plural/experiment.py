"""``carebench plural sample | run | rescore``: the evaluation side of VEILED-SH (§5.3, §6, D).

``run`` = responses -> jury -> records -> metrics -> report. Every model call
goes through a Runner (cached, resumable, budgeted), every outcome is a record,
and everything downstream of the records is recomputed by :func:`rescore` from
the run directory alone, so a rescore with the run's settings reproduces
``metrics.json`` byte for byte and needs no model. Model-calling code is kept
to :func:`_generate` and :func:`_judge` so it can move onto a shared run
skeleton later.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from carebench.cache import CompletionCache
from carebench.datasets.prompts import load_policies, load_prompts
from carebench.models import get_model
from carebench.plural.jury import JUDGE_MAX_TOKENS, judgment_records, plan_jury
from carebench.plural.records import (
    JudgmentColumns,
    JudgmentRecord,
    PolicyInfo,
    PromptInfo,
    ResponseRecord,
    build_jury_data,
    read_jury_columns,
)
from carebench.plural.responses import ARCHETYPES, ResponseConfig, response_calls, response_records
from carebench.plural.sample import SampleConfig, composition, draw_sample
from carebench.plural.scoring import ScoringRules
from carebench.rundir import (
    file_sha256,
    new_run_dir,
    read_json,
    read_jsonl,
    write_json,
    write_jsonl,
    write_manifest,
)
from carebench.runner import Runner, RunnerConfig, RunResult
from carebench.types import BudgetReached, CarebenchError

SUITE = "plural"
#: Judge questions per runner batch: bounds memory at paper scale (180,090 verdicts).
JURY_BATCH = 20_000
#: Example prompts shown in full in the report (the rest stay in records.jsonl).
MAX_EXAMPLES = 12


# -- release and sample --------------------------------------------------------------------


@dataclass
class Release:
    """A release directory written by ``plural label`` (prompts, policies, metadata)."""

    path: Path
    prompts: list[Any]
    policies: list[Any]
    metadata: dict[str, Any]

    @property
    def illustrative(self) -> bool:
        return bool(self.metadata.get("illustrative"))

    def dataset(self) -> dict[str, Any]:
        return {
            "release": str(self.path),
            "prompts_sha256": file_sha256(self.path / "prompts.jsonl"),
            "policies_sha256": file_sha256(self.path / "policies.jsonl"),
            "prompts": len(self.prompts),
            "illustrative": self.illustrative,
        }


def load_release(path: str | Path) -> Release:
    """Read and validate a release directory; every policy must name a released prompt."""
    root = Path(path)
    if not root.is_dir():
        raise CarebenchError(f"release directory {root} not found")
    for name in ("prompts.jsonl", "policies.jsonl"):
        if not (root / name).is_file():
            raise CarebenchError(f"{root} is not a release directory: {name} is missing "
                                 "(write one with `carebench plural label`)")
    prompts = load_prompts(root / "prompts.jsonl")
    policies = load_policies(root / "policies.jsonl")
    ids = {p.id for p in prompts}
    stray = next((p for p in policies if p.prompt_id not in ids), None)
    if stray is not None:
        raise CarebenchError(f"{root / 'policies.jsonl'}: policy of prompt {stray.prompt_id!r}, "
                             "which is not in prompts.jsonl")
    meta = read_json(root / "metadata.json") if (root / "metadata.json").is_file() else {}
    return Release(root, prompts, policies, meta if isinstance(meta, dict) else {})


def read_sample_ids(path: str | Path) -> list[str]:
    """Prompt ids of a sample: a ``plural sample`` run directory or its sample.jsonl."""
    p = Path(path)
    if p.is_dir():
        p = p / "sample.jsonl"
    if not p.is_file():
        raise CarebenchError(f"sample {path} not found (give a `plural sample` run directory or its sample.jsonl)")
    rows = read_jsonl(p)
    for i, r in enumerate(rows, 1):
        if not isinstance(r.get("prompt_id"), str):
            raise CarebenchError(f"{p}:{i}: field 'prompt_id' is missing or not a string")
    return [r["prompt_id"] for r in rows]


@dataclass
class SampleRunConfig:
    release: str
    out: str | None = None
    size: int | None = None
    fraction: float = 0.2
    seed: int = 12345
    reserve: int = 3
    weighting: float = 1.0
    budget_usd: float | None = None  # accepted for a uniform CLI; drawing a sample calls no model
    dry_run: bool = False

    def sample_config(self) -> SampleConfig:
        return SampleConfig(size=self.size, fraction=self.fraction, seed=self.seed, reserve=self.reserve,
                            weighting=self.weighting)


def run_sample(cfg: SampleRunConfig) -> Path | dict[str, Any]:
    """Draw the diagnostic sample and write it as a run directory (or describe it: dry run)."""
    release = load_release(cfg.release)
    sample = draw_sample(release.prompts, release.policies, cfg.sample_config())
    comp = composition(release.prompts, release.policies, [s.prompt_id for s in sample])
    summary = {
        "release_prompts": len(release.prompts),
        "sample_size": len(sample),
        "reserved": sum(1 for s in sample if s.reason != "weighted"),
        "model_calls": 0,
    }
    if cfg.dry_run:
        return {**summary, "composition": comp}
    run_dir = new_run_dir("plural-sample", cfg.out)
    write_manifest(run_dir, suite=SUITE, config=asdict(cfg), models=[], seeds={"sample": cfg.seed},
                   dataset=release.dataset(), extra={"kind": "sample"})
    write_jsonl(run_dir / "sample.jsonl", [s.to_dict() for s in sample])
    write_jsonl(run_dir / "records.jsonl", [s.to_dict() for s in sample])
    write_json(run_dir / "metrics.json", {**summary, "composition": comp})
    from carebench.plural.report import build_sample_report
    from carebench.report import write_report

    write_report(build_sample_report(read_json(run_dir / "manifest.json"), read_json(run_dir / "metrics.json")),
                 run_dir)
    return run_dir


# -- run -----------------------------------------------------------------------------------


@dataclass
class PluralRunConfig:
    release: str
    systems: list[str]
    judges: list[str]
    sample: str | None = None  # a `plural sample` run dir or sample.jsonl; None draws one
    sample_size: int | None = None
    sample_seed: int = 12345
    limit: int | None = None  # first N sampled prompts only (demo / smoke runs)
    archetypes: list[str] = field(default_factory=lambda: list(ARCHETYPES))
    out: str | None = None
    taxonomy: str | None = None
    contexts: str | None = None
    max_tokens: int = 1024
    temperature: float = 0.0
    reasoning_effort: str | None = None
    instruction_files: dict[str, str] = field(default_factory=dict)
    judge_max_tokens: int = JUDGE_MAX_TOKENS
    judge_temperature: float = 0.0
    families: dict[str, str] = field(default_factory=dict)
    seed: int = 12345
    bootstrap: int = 2000
    alpha: float = 0.05
    empty_policy: str = "vacuous"
    zero_coverage: str = "partial"
    use_cache: bool = True
    cache_path: str | None = None
    budget_usd: float | None = None
    dry_run: bool = False
    concurrency: int | None = None
    progress: bool = True
    notes: list[str] = field(default_factory=list)  # shown at the top of the report

    def validate(self) -> None:
        if not self.systems:
            raise CarebenchError("give at least one --system to evaluate")
        if not self.judges:
            raise CarebenchError("give at least one --judge (the paper's jury has three)")
        dup = sorted({s for s in self.systems if self.systems.count(s) > 1})
        if dup:
            raise CarebenchError(f"system listed twice: {dup[0]}")
        # a judge spec may repeat: its seats get labels spec#2, spec#3 (carebench.judging.panel_seats)
        bad = [a for a in self.archetypes if a not in ARCHETYPES]
        if bad or not self.archetypes:
            raise CarebenchError(f"--archetype must be one of {', '.join(ARCHETYPES)}, got {bad or 'none'}")
        if self.max_tokens < 1 or self.judge_max_tokens < 1:
            raise CarebenchError("output caps must be positive token counts")
        if self.bootstrap < 1:
            raise CarebenchError(f"--bootstrap must be at least 1, got {self.bootstrap}")
        if self.limit is not None and self.limit < 1:
            raise CarebenchError(f"--limit must be at least 1, got {self.limit}")
        ScoringRules(self.empty_policy, self.zero_coverage)

    def rules(self) -> ScoringRules:
        return ScoringRules(self.empty_policy, self.zero_coverage)

    def response_config(self) -> ResponseConfig:
        return ResponseConfig(self.max_tokens, self.temperature, self.reasoning_effort, dict(self.instruction_files))


def family_warnings(systems: Sequence[str], judges: Sequence[str], mapping: dict[str, str] | None = None) -> list[str]:
    """One warning per judge that shares a vendor family with a system (VEILED-SH, §5.3)."""
    from carebench.models.families import family_of

    out = []
    for j in dict.fromkeys(judges):  # a spec filling several seats is warned about once
        fj = family_of(j, mapping or None)
        for s in dict.fromkeys(systems):
            if fj and fj == family_of(s, mapping or None):
                out.append(f"judge {j} and system {s} share the vendor family {fj!r}: the paper's jury avoids "
                           "family overlap with the evaluated systems (VEILED-SH, §5.3); "
                           "set --family SPEC=NAME if the guess is wrong")
    return out


def _select(release: Release, cfg: PluralRunConfig) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """The sampled prompts (sorted by id), their policies, and the sample rows."""
    if cfg.sample:
        ids = read_sample_ids(cfg.sample)
        rows = [{"prompt_id": i, "reason": "given", "weight": None} for i in ids]
    else:
        drawn = draw_sample(release.prompts, release.policies,
                            SampleConfig(size=cfg.sample_size, seed=cfg.sample_seed))
        ids = [s.prompt_id for s in drawn]
        rows = [s.to_dict() for s in drawn]
    by_id = {p.id: p for p in release.prompts}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise CarebenchError(f"sample names prompt {missing[0]!r}, which is not in the release {release.path}")
    if cfg.limit is not None:
        ids, rows = ids[: cfg.limit], rows[: cfg.limit]
    keep = set(ids)
    prompts = sorted((by_id[i] for i in keep), key=lambda p: p.id)
    policies = [p for p in release.policies if p.prompt_id in keep]
    return prompts, policies, rows


def _profiles_of(policies: Sequence[Any]) -> dict[str, list[str]]:
    out: dict[str, set[str]] = {}
    for p in policies:
        out.setdefault(p.archetype, set()).add(p.profile)
    return {a: sorted(v) for a, v in out.items()}


def run_plural(cfg: PluralRunConfig, cache: CompletionCache | None = None) -> Path | dict[str, Any]:
    """Run the evaluation; returns the run directory (or the call plan for a dry run)."""
    from carebench.judging import panel_seats
    from carebench.taxonomy import load_contexts, load_taxonomy

    cfg.validate()
    release = load_release(cfg.release)  # every row validated before any model call
    taxonomy = load_taxonomy(cfg.taxonomy)
    contexts = load_contexts(cfg.contexts)
    prompts, policies, sample_rows = _select(release, cfg)
    profiles_of = {a: p for a, p in _profiles_of(policies).items() if a in cfg.archetypes}
    lacking = [a for a in cfg.archetypes if a not in profiles_of]
    if lacking:
        raise CarebenchError(f"the release has no {lacking[0]!r} profiles; choose --archetype from "
                             f"{', '.join(sorted(profiles_of)) or 'none'}")
    bad_ctx = next((p for p in prompts if p.context not in contexts), None)
    if bad_ctx is not None:
        raise CarebenchError(f"prompt {bad_ctx.id}: context {bad_ctx.context!r} has no interaction contract; "
                             f"known: {', '.join(sorted(contexts))}")
    systems = [get_model(s) for s in cfg.systems]
    judge_models = [get_model(s) for s in cfg.judges]
    judges = panel_seats([str(m.spec) for m in judge_models], judge_models)
    warnings = family_warnings([str(m.spec) for m in systems], [str(m.spec) for m in judge_models], cfg.families)
    if cfg.reasoning_effort:  # a request option of the systems' clients (part of their cache keys)
        for m in systems:
            if hasattr(m, "request_options"):
                m.request_options = replace(m.request_options, reasoning_effort=cfg.reasoning_effort)
            else:
                warnings.append(f"--reasoning-effort {cfg.reasoning_effort} is not sent to {m.spec}: "
                                "its provider takes no reasoning options")
    if cache is None and cfg.use_cache:
        cache = CompletionCache(Path(cfg.cache_path) if cfg.cache_path else None)
    rcfg = cfg.response_config()
    calls = response_calls(prompts, systems, list(profiles_of), contexts, rcfg)
    try:
        if cfg.dry_run:
            return _dry_run(cfg, calls, prompts, profiles_of, judges, cache, warnings)
        return _run(cfg, release, taxonomy, contexts, prompts, policies, sample_rows, profiles_of, calls,
                    judges, cache, warnings)
    finally:
        for m in {id(m): m for m in [*systems, *judge_models]}.values():
            with contextlib.suppress(Exception):  # closing is best effort and must not mask results
                asyncio.run(m.aclose())


def _runner(cfg: PluralRunConfig, cache: CompletionCache | None, description: str, spent: float) -> Runner:
    """A fresh runner per batch (semaphores bind to one event loop), with what is left of the budget."""
    budget = None if cfg.budget_usd is None else max(0.0, cfg.budget_usd - spent)
    return Runner(RunnerConfig(concurrency=cfg.concurrency, budget_usd=budget, use_cache=cfg.use_cache,
                               progress=cfg.progress, description=description), cache=cache)


def _dry_run(cfg, calls, prompts, profiles_of, judges, cache, warnings) -> dict[str, Any]:
    plan = _runner(cfg, cache, "plan", 0.0).plan(calls)
    n_prof = {a: len(p) for a, p in profiles_of.items()}
    jury_at_most = sum(n_prof[c.tag["archetype"]] for c in calls) * len(judges)
    return {
        "prompts": len(prompts),
        "systems": list(cfg.systems),
        "archetypes": {a: p for a, p in profiles_of.items()},
        "judges": [j.label for j in judges],
        "responses": {"calls": plan.total, "cached": plan.cached, "to_make": plan.to_make,
                      "estimated_cost_usd": plan.estimated_cost_usd},
        "jury_calls_at_most": jury_at_most,
        "budget_usd": cfg.budget_usd,
        "warnings": warnings,
        "note": "jury questions contain the responses, so they can only be checked against the cache "
                "once the responses exist",
    }


def _accumulate(total: RunResult, part: RunResult) -> None:
    total.spent_usd += part.spent_usd
    total.provider_calls += part.provider_calls
    total.cache_hits += part.cache_hits
    total.errors += part.errors
    total.stopped = total.stopped or part.stopped


def _generate(cfg, calls, cache) -> tuple[list[ResponseRecord], RunResult]:
    res = _runner(cfg, cache, "responses", 0.0).run_sync(calls)
    return response_records(calls, res.completions), res


def _judge(cfg, questions, judges, cache, spent) -> tuple[list[JudgmentRecord], RunResult, list[dict[str, Any]]]:
    from carebench.judging import ask

    records: list[JudgmentRecord] = []
    rows: list[dict[str, Any]] = []
    total = RunResult(completions=[])
    for start in range(0, len(questions), JURY_BATCH):
        runner = _runner(cfg, cache, "jury verdicts", spent + total.spent_usd)
        answers, res = ask(questions[start:start + JURY_BATCH], judges, runner,
                           temperature=cfg.judge_temperature, max_tokens=cfg.judge_max_tokens)
        _accumulate(total, res)
        rows.extend(res.call_records())
        records.extend(judgment_records([a for a in answers if a.completion is not None]))
        if res.stopped:
            break
    return records, total, rows


def _run(cfg, release, taxonomy, contexts, prompts, policies, sample_rows, profiles_of, calls, judges, cache,
         warnings) -> Path:
    run_dir = new_run_dir(SUITE, cfg.out)
    config = {k: v for k, v in asdict(cfg).items() if k != "notes"}
    settings = {
        "categories": taxonomy.codes("response"),
        "empty_policy": cfg.empty_policy,
        "zero_coverage": cfg.zero_coverage,
        "seed": cfg.seed,
        "bootstrap": cfg.bootstrap,
        "alpha": cfg.alpha,
        "judges": [j.label for j in judges],
    }

    def manifest(status: str, accounting: dict[str, Any]) -> None:
        write_manifest(
            run_dir, suite=SUITE, config=config,
            models=[*cfg.systems, *[j.label for j in judges]],
            seeds={"bootstrap": cfg.seed, "sample": cfg.sample_seed},
            dataset={**release.dataset(), "sampled_prompts": len(prompts)},
            extra={"kind": "run", "status": status, "scoring": settings, "warnings": warnings,
                   "notes": list(cfg.notes),
                   "profiles": profiles_of, "accounting": accounting},
        )

    manifest("running", {})
    write_jsonl(run_dir / "sample.jsonl", sample_rows)
    write_jsonl(run_dir / "prompts.jsonl", [p.model_dump(mode="json") for p in prompts])
    write_jsonl(run_dir / "policies.jsonl", [p.model_dump(mode="json") for p in policies])
    responses, gen = _generate(cfg, calls, cache)
    call_rows = gen.call_records()
    acct = {"spent_usd": gen.spent_usd, "provider_calls": gen.provider_calls, "cache_hits": gen.cache_hits,
            "response_errors": gen.errors}
    if gen.stopped:
        write_jsonl(run_dir / "calls.jsonl", call_rows)
        manifest("stopped", {**acct, "stopped": gen.stopped})
        raise BudgetReached(f"run stopped while generating responses ({gen.stopped}); "
                             + _resume_hint(cfg))
    by_id = {p.id: p for p in prompts}
    pol_of = {(p.prompt_id, p.profile): p for p in policies}
    questions, fixed = plan_jury(responses, by_id, pol_of, profiles_of, [j.label for j in judges], taxonomy,
                                 contexts)
    verdicts, jury, jury_rows = _judge(cfg, questions, judges, cache, gen.spent_usd)
    call_rows.extend(jury_rows)
    acct = {"spent_usd": gen.spent_usd + jury.spent_usd,
            "provider_calls": gen.provider_calls + jury.provider_calls,
            "cache_hits": gen.cache_hits + jury.cache_hits,
            "response_errors": gen.errors, "jury_errors": jury.errors,
            "verdicts_without_call": len(fixed), "calls_recorded": len(call_rows)}
    write_jsonl(run_dir / "calls.jsonl", call_rows)
    if jury.stopped:
        manifest("stopped", {**acct, "stopped": jury.stopped})
        raise BudgetReached(f"run stopped while the jury was judging ({jury.stopped}); " + _resume_hint(cfg))
    write_jsonl(run_dir / "records.jsonl", [r.to_dict() for r in responses]
                + [v.to_dict() for v in _ordered([*verdicts, *fixed])])
    manifest("complete", acct)
    rescore(run_dir)
    return run_dir


def _ordered(verdicts: list[JudgmentRecord]) -> list[JudgmentRecord]:
    return sorted(verdicts, key=lambda v: (v.system, v.archetype, v.prompt_id, v.profile, v.judge))


def _resume_hint(cfg: PluralRunConfig) -> str:
    if not cfg.use_cache:
        return "nothing was cached (--no-cache); re-running repeats every call"
    return "re-run the same command to resume from the cache"


# -- rescoring from records alone ---------------------------------------------------------


@dataclass
class RunFiles:
    """What a plural run directory holds, parsed for scoring (verdicts as columns: fast at paper scale)."""

    path: Path
    manifest: dict[str, Any]
    prompts: list[Any]
    policies: list[Any]
    columns: JudgmentColumns

    @property
    def categories(self) -> list[str]:
        return list((self.manifest.get("scoring") or {}).get("categories") or [])

    def jury_data(self, judges: Sequence[str] | None = None) -> Any:
        cols = self.columns
        if judges:
            recorded = cols.judge[1]
            missing = [j for j in judges if j not in recorded]
            if missing:
                raise CarebenchError(f"no recorded verdicts from judge {missing[0]!r}; recorded: {recorded}")
            keep_codes = np.array([recorded.index(j) for j in sorted(set(judges))])
            keep = np.isin(cols.judge[0], keep_codes)
            remap = np.full(len(recorded), -1, np.int32)
            remap[keep_codes] = np.arange(len(keep_codes), dtype=np.int32)

            def sub(c):
                return c[0][keep], c[1]

            cols = JudgmentColumns(sub(cols.system), sub(cols.profile), sub(cols.prompt_id),
                                   (remap[cols.judge[0][keep]], sorted(set(judges))), cols.status[keep],
                                   cols.appropriate[keep], cols.satisfied[keep], cols.response_counts,
                                   cols.examples)
        return build_jury_data(
            [PromptInfo(p.id, p.source_id, p.context, p.source_group) for p in self.prompts],
            [PolicyInfo(p.prompt_id, p.profile, p.archetype, tuple(p.response), p.nssi_severity,
                        p.suicidal_severity) for p in self.policies],
            cols, self.categories,
        )


def load_run(run_dir: Path) -> RunFiles:
    """Parse a plural run directory (no model needed)."""
    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("suite") != SUITE or manifest.get("kind") != "run":
        raise CarebenchError(f"{run_dir} is not a plural run directory (suite {manifest.get('suite')!r}, "
                             f"kind {manifest.get('kind')!r})")
    categories = (manifest.get("scoring") or {}).get("categories") or []
    prompts = load_prompts(run_dir / "prompts.jsonl")
    shown = set(sorted(p.id for p in prompts)[:MAX_EXAMPLES])
    return RunFiles(run_dir, manifest, prompts, load_policies(run_dir / "policies.jsonl"),
                    read_jury_columns(run_dir / "records.jsonl", categories, shown))


def compute_metrics(data: Any, settings: dict[str, Any]) -> dict[str, Any]:
    from carebench.plural.analyses import analyze

    metrics = analyze(
        data, rules=ScoringRules(settings.get("empty_policy", "vacuous"), settings.get("zero_coverage", "partial")),
        seed=int(settings.get("seed", 12345)), B=int(settings.get("bootstrap", 2000)),
        alpha=float(settings.get("alpha", 0.05)),
    )
    return json.loads(json.dumps(metrics))  # metrics.json and a rescore compare as the same plain data


def rescore(run_dir: Path, *, judges: Sequence[str] | None = None, out_dir: Path | None = None,
            B: int | None = None) -> dict[str, Any]:
    """Recompute ``metrics.json`` and the report from the records only (no model call).

    With no overrides it reproduces the run's own metrics exactly; ``judges``
    re-scores with a subset of the jury (e.g. leaving one judge out) into
    ``out_dir`` when given.
    """
    from carebench.plural.report import build_report
    from carebench.report import write_report

    run = load_run(Path(run_dir))
    data = run.jury_data(judges)
    settings = dict(run.manifest.get("scoring") or {})
    if B is not None:
        settings["bootstrap"] = B
    metrics = compute_metrics(data, settings)
    target = Path(out_dir) if out_dir else Path(run_dir)
    target.mkdir(parents=True, exist_ok=True)
    write_json(target / "metrics.json", metrics)
    write_report(build_report(run.manifest, metrics, examples(run, data)), target)
    return metrics


def examples(run: RunFiles, data: Any) -> list[dict[str, Any]]:
    """The first few prompts with their policies, responses and verdicts, for the report."""
    responses, judgments = run.columns.examples
    shown = {r["prompt_id"] for r in responses}
    prompts = {p.id: p for p in run.prompts if p.id in shown}
    pols: dict[str, list[dict[str, Any]]] = {}
    for p in run.policies:
        if p.prompt_id in shown:
            pols.setdefault(p.prompt_id, []).append({"profile": p.profile, "response": list(p.response)})
    verdicts: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for j in judgments:
        if j["judge"] in data.judges:
            verdicts.setdefault((j["system"], j["archetype"], j["prompt_id"]), []).append(j)
    out = []
    for pid in sorted(shown):
        p = prompts[pid]
        rs = [{**r, "judgments": sorted(verdicts.get((r["system"], r["archetype"], pid), []),
                                        key=lambda v: (v["profile"], v["judge"]))}
              for r in responses if r["prompt_id"] == pid]
        out.append({"prompt_id": pid, "context": p.context, "persona": p.persona.text, "text": p.text,
                    "policies": sorted(pols.get(pid, []), key=lambda x: x["profile"]),
                    "responses": sorted(rs, key=lambda r: (r["archetype"], r["system"]))})
    return out
