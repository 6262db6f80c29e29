"""``carebench plural sample | run | rescore``: the evaluation side of VEILED-SH (§5.3, §6, D).

``run`` = responses -> jury -> records -> metrics -> report, on the experiment
skeleton (:mod:`carebench.experiment`): every model call goes through the
command's one run context (cached, resumable, one budget), every outcome is a
record, and everything downstream of the records is recomputed from the run
directory alone, so ``carebench report DIR`` and ``plural rescore`` reproduce
``metrics.json`` and the report byte for byte and need no model.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from carebench.cache import CompletionCache
from carebench.datasets.prompts import load_policies, load_prompts
from carebench.experiment import (
    Execution,
    Plan,
    incomplete_metrics,
    rerender,
    stage,
)
from carebench.plural.jury import JUDGE_MAX_TOKENS, judgment_records, plan_jury
from carebench.plural.records import (
    PARQUET_COLUMNS,
    JudgmentColumns,
    JudgmentRecord,
    PolicyInfo,
    PromptInfo,
    ResponseRecord,
    build_jury_data,
    read_jury_columns,
)
from carebench.plural.responses import ARCHETYPES, ResponseConfig, response_calls, response_records
from carebench.plural.runs import SUITE, PluralCommand, no_call_options, run_plural_command
from carebench.plural.sample import PolicySampleConfig, composition, draw_sample
from carebench.plural.scoring import ScoringRules
from carebench.report import Report
from carebench.run import Run, RunOptions
from carebench.run_options import run_options
from carebench.rundir import file_sha256, new_run_dir, read_json, read_jsonl
from carebench.types import CarebenchError, Completion, is_harness_failure

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
    """Read and validate a release directory; every policy must name a released prompt.
    ``builtin`` (or ``builtin:release``) is the small illustrative release in the package,
    so ``plural run`` can be tried before calibrate, freeze and label."""
    root = Path(path)
    if str(path) in ("builtin", "builtin:release"):
        from carebench.datasets.builtin import package_file

        root = package_file("plural", "release")
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


def release_profiles(release: Release) -> dict[str, str]:
    """Profile alias -> archetype, as ``metadata.json`` declares them (a list of
    ``{"alias", "archetype"}`` as ``plural label`` writes, or an alias -> fields map)."""
    where = release.path / "metadata.json"
    if not where.is_file():
        raise CarebenchError(f"{release.path} is not a release directory: metadata.json is missing "
                             "(it declares the profiles; write one with `carebench plural label`)")
    listed = release.metadata.get("profiles")
    if isinstance(listed, dict):
        listed = [{"alias": k, **(v if isinstance(v, dict) else {})} for k, v in listed.items()]
    if not isinstance(listed, list) or not all(isinstance(p, dict) and p.get("alias") for p in listed):
        raise CarebenchError(f"{where}: 'profiles' must list each profile's alias and archetype")
    return {str(p["alias"]): str(p.get("archetype") or "") for p in listed}


def check_release(release: Release, taxonomy: Any, contexts: Mapping[str, Any]) -> None:
    """The whole release checked before any call: every prompt's context has a contract,
    every policy names a declared profile with its declared archetype and is a valid label
    combination under the taxonomy (codes, exclusive codes, severities with their intent)."""
    profiles = release_profiles(release)
    for p in release.prompts:
        if p.context not in contexts:
            raise CarebenchError(f"{release.path / 'prompts.jsonl'}: prompt {p.id}: context {p.context!r} has no "
                                 f"interaction contract; known: {', '.join(sorted(contexts))}")
    where = release.path / "policies.jsonl"
    for i, pol in enumerate(release.policies, 1):
        at = f"{where}:{i}: policy of prompt {pol.prompt_id!r}, profile {pol.profile!r}"
        if pol.profile not in profiles:
            raise CarebenchError(f"{at}: the profile is not declared in metadata.json "
                                 f"(declared: {', '.join(sorted(profiles)) or 'none'})")
        if profiles[pol.profile] and profiles[pol.profile] != pol.archetype:
            raise CarebenchError(f"{at}: archetype {pol.archetype!r}, but metadata.json declares "
                                 f"{profiles[pol.profile]!r}")
        problems = taxonomy.validate_policy(pol.intent, pol.function, pol.response, pol.nssi_severity,
                                            pol.suicidal_severity)
        if problems:
            raise CarebenchError(f"{at}: {problems[0]}")


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
    size: int | None = None
    fraction: float = 0.2
    seed: int = 12345
    reserve: int = 3
    weighting: float = 1.0
    #: the run context's settings (a sample makes no call, but runs like every command;
    #: --budget is accepted for a uniform CLI)
    run: RunOptions = field(default_factory=no_call_options)

    def sample_config(self) -> PolicySampleConfig:
        return PolicySampleConfig(size=self.size, fraction=self.fraction, seed=self.seed, reserve=self.reserve,
                            weighting=self.weighting)


class SampleCommand(PluralCommand):
    """``plural sample`` on the run skeleton (no model call). The composition is worked
    out against the release when the sample is drawn and recorded in the manifest, so
    ``carebench report`` re-renders it without the release."""

    title = "Plural: diagnostic sample"

    def draw(self) -> tuple[Release, list[Any], dict[str, Any]]:
        cfg = self.config()
        release = load_release(cfg.release)
        sample = draw_sample(release.prompts, release.policies, cfg.sample_config())
        summary = {
            "release_prompts": len(release.prompts),
            "sample_size": len(sample),
            "reserved": sum(1 for s in sample if s.reason != "weighted"),
            "model_calls": 0,
            "composition": composition(release.prompts, release.policies, [s.prompt_id for s in sample]),
        }
        return release, sample, summary

    def plan(self, run: Run) -> Plan:
        return Plan(self.name, [], ["drawing a sample makes no model call"])

    def execute(self, run: Run) -> Execution:
        release, sample, summary = self.draw()
        rows = [s.to_dict() for s in sample]
        return Execution(records=rows, config=asdict(self.cfg), dataset=release.dataset(),
                         seeds={"sample": self.cfg.seed}, models=[],
                         extra={"kind": "sample", "summary": summary}, files={"sample.jsonl": rows})

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return dict(manifest["summary"])

    def full_report(self, metrics: Mapping[str, Any], records: list[dict[str, Any]],
                    manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.report import build_sample_report

        return build_sample_report(manifest, metrics)


def run_sample(cfg: SampleRunConfig) -> Path | dict[str, Any]:
    """Draw the diagnostic sample and write it as a run directory (or describe it: dry run,
    which prints the composition: there are no calls to plan)."""
    if cfg.run.dry_run:
        return SampleCommand(cfg).draw()[2]
    return run_plural_command(SampleCommand(cfg), cfg, "sample")


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
    notes: list[str] = field(default_factory=list)  # shown at the top of the report
    #: the shared run flags (--out, --cache, --budget, ...)
    run: RunOptions = field(default_factory=run_options)

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
                            PolicySampleConfig(size=cfg.sample_size, seed=cfg.sample_seed))
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

    def _prepare(self, run: Run) -> Prepared:
        from carebench.judging import panel_seats
        from carebench.taxonomy import load_contexts, load_taxonomy

        cfg = self.config()
        cfg.validate()
        release = load_release(cfg.release)  # every row validated before any model call
        taxonomy = load_taxonomy(cfg.taxonomy)
        contexts = load_contexts(cfg.contexts)
        check_release(release, taxonomy, contexts)
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
        from carebench.runner import call_key

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
        return Plan(self.name, [stage(run, "responses", pre.calls), stage(run, "jury", jury, exact=known)], notes)

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
        config = {k: v for k, v in asdict(cfg).items() if k != "notes"}
        settings = {
            "categories": pre.taxonomy.codes("response"),
            "empty_policy": cfg.empty_policy,
            "zero_coverage": cfg.zero_coverage,
            "seed": cfg.seed,
            "bootstrap": cfg.bootstrap,
            "alpha": cfg.alpha,
            "judges": [j.label for j in pre.judges],
        }
        # calls that failed every retry (server down, timeout, HTTP 5xx) make the run incomplete;
        # a permanent rejection (HTTP 4xx) is the request's outcome. Both are left out and counted.
        failures = {"response_calls": sum(r.status == "error" and is_harness_failure(r.error) for r in responses),
                    "jury_calls": sum(v.status == "error" and is_harness_failure(v.rationale) for v in verdicts)}
        return Execution(
            records=[r.to_dict() for r in responses] + [v.to_dict() for v in _ordered(verdicts)],
            config=config,
            dataset={**pre.release.dataset(), "sampled_prompts": len(pre.prompts)},
            seeds={"bootstrap": cfg.seed, "sample": cfg.sample_seed},
            models=[*cfg.systems, *[j.label for j in pre.judges]],
            extra={"kind": "run", "scoring": settings, "warnings": pre.warnings, "notes": list(cfg.notes),
                   "profiles": pre.profiles_of, "harness_failures": failures,
                   "taxonomy_names": pre.taxonomy.names(),  # reports show names, not codes
                   "output_modes": run.output_modes()},
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
        settings = dict(manifest.get("scoring") or {})
        return compute_metrics(records.jury_data(settings.get("scored_judges")), settings)

    def full_report(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.plural.report import build_report

        settings = manifest.get("scoring") or {}
        return build_report(manifest, metrics, examples(records, records.jury_data(settings.get("scored_judges"))))


def run_plural(cfg: PluralRunConfig, cache: CompletionCache | None = None) -> Path | Plan:
    """Run the evaluation; returns the run directory (or the call plan for a dry run)."""
    return run_plural_command(RunCommand(cfg), cfg, "run", cache)


def _ordered(verdicts: list[JudgmentRecord]) -> list[JudgmentRecord]:
    return sorted(verdicts, key=lambda v: (v.system, v.archetype, v.prompt_id, v.profile, v.judge))


# -- rescoring from records alone ---------------------------------------------------------


@dataclass
class RunFiles:
    """What a plural run directory holds, parsed for scoring (verdicts as columns: fast at paper scale)."""

    path: Path
    manifest: dict[str, Any]
    prompts: list[Any]
    policies: list[Any]
    columns: JudgmentColumns
    _data: dict[tuple[str, ...], Any] = field(default_factory=dict, repr=False)

    @property
    def categories(self) -> list[str]:
        return list((self.manifest.get("scoring") or {}).get("categories") or [])

    def jury_data(self, judges: Sequence[str] | None = None) -> Any:
        """The scoring arrays, with only ``judges`` when given (built once per judge set)."""
        key = tuple(judges or ())
        if key not in self._data:
            self._data[key] = self._jury_data(judges)
        return self._data[key]

    def _jury_data(self, judges: Sequence[str] | None) -> Any:
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
            [PromptInfo.of(p) for p in self.prompts],
            [PolicyInfo(p.prompt_id, p.profile, p.archetype, tuple(p.response), p.nssi_severity,
                        p.suicidal_severity) for p in self.policies],
            cols, self.categories,
        )


def load_run(run_dir: Path, manifest: Mapping[str, Any] | None = None) -> RunFiles:
    """Parse a plural run directory (no model needed)."""
    run_dir = Path(run_dir)
    manifest = dict(manifest) if manifest is not None else read_json(run_dir / "manifest.json")
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

    With no overrides it reproduces the run's own metrics exactly (it is what
    ``carebench report`` does); ``judges`` re-scores with a subset of the jury (e.g.
    leaving one judge out) into ``out_dir`` when given.
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
    rescored = {**manifest, "scoring": scoring}
    if out_dir is None or Path(out_dir).resolve() == Path(run_dir).resolve():
        return rerender(run_dir, RunCommand(), manifest=rescored)
    return _rescore_into(Path(run_dir), Path(out_dir), rescored)


#: what a re-score writes itself; every other file of the run is copied unchanged
_RENDERED = ("manifest.json", "metrics.json", "report.md", "report.html", "figures")


def _rescore_into(run_dir: Path, out_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A re-score as a run directory of its own: the source run's records copied unchanged,
    then metrics and the report, then (last) a manifest naming the source run and the judges
    kept, so ``carebench report OUT`` re-renders it and the source run is left untouched."""
    import shutil

    from carebench.rundir import write_json

    out_dir = new_run_dir(SUITE, out_dir)
    (out_dir / "manifest.json").unlink(missing_ok=True)  # an older run there: no manifest until done
    for f in sorted(run_dir.iterdir()):
        if f.name in _RENDERED:
            continue
        if f.is_dir():
            shutil.copytree(f, out_dir / f.name, dirs_exist_ok=True)
        else:
            shutil.copy2(f, out_dir / f.name)
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
