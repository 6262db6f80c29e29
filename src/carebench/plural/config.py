"""The evaluation side of VEILED-SH (§5.3, §6, Appendix D): releases, samples, run settings, scoring.

``plural run`` = responses -> jury -> records -> metrics -> report. This module holds
the pure work of ``plural sample | run | rescore``: reading and checking a release,
choosing the sampled prompts, the configs, and parsing a run directory's records into
the scoring arrays and metrics. The commands themselves (:class:`SampleCommand`,
:class:`RunCommand`, ``run_sample``, ``run_plural``, ``rescore``) are in
:mod:`carebench.plural.commands`: every model call goes through the command's one run
context, and everything downstream of the records is recomputed from the run directory
alone, so ``carebench report DIR`` and ``plural rescore`` reproduce ``metrics.json`` and
the report byte for byte and need no model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.datasets.prompts import load_policies, load_prompts
from carebench.engine.options import RunOptions, run_options
from carebench.engine.rundir import file_sha256, read_json, read_jsonl
from carebench.models.base import SpecLike, spec_texts
from carebench.plural.jury import JUDGE_MAX_TOKENS
from carebench.plural.records import (
    JudgmentColumns,
    PolicyInfo,
    PromptInfo,
    build_jury_data,
    read_jury_columns,
)
from carebench.plural.responses import ARCHETYPES, ResponseConfig
from carebench.plural.runs import SUITE, no_call_options
from carebench.plural.sample import PolicySampleConfig, draw_sample
from carebench.plural.scoring import ScoringRules
from carebench.types import CarebenchError

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
    options: RunOptions = field(default_factory=no_call_options)

    def sample_config(self) -> PolicySampleConfig:
        return PolicySampleConfig(size=self.size, fraction=self.fraction, seed=self.seed, reserve=self.reserve,
                            weighting=self.weighting)


# -- run -----------------------------------------------------------------------------------


@dataclass
class PluralRunConfig:
    release: str
    #: the ModelSpec objects the command line was parsed into (a spec's text, e.g. a script's, is
    #: parsed by ``Run.model``); the manifest holds their text (:meth:`manifest_config`)
    systems: list[SpecLike]
    judges: list[SpecLike]
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
    #: --engagement: how each response gets its engagement class (carebench.engagement); the
    #: default asks no model, so a run's calls stay the seed's protocol
    engagement: str = "prefilter"
    #: --refusal-policy: what a refusal or deflection scores (carebench.plural.engagement)
    refusal_policy: str = "seed"
    notes: list[str] = field(default_factory=list)  # shown at the top of the report
    #: --locale: the BCP-47 locale of every prompt without its own (None: such prompts have none)
    locale: str | None = None
    #: --resources: the crisis-resource registry replies are checked against (None: built-in)
    resources: str | None = None
    #: the shared run flags (--out, --cache, --budget, ...)
    options: RunOptions = field(default_factory=run_options)

    def validate(self) -> None:
        from carebench.resources.options import run_locale

        self.locale = run_locale(self.locale)
        if not self.systems:
            raise CarebenchError("give at least one --system to evaluate")
        if not self.judges:
            raise CarebenchError("give at least one --judge (the paper's jury has three)")
        names = [str(s) for s in self.systems]  # a ModelSpec does not sort; its text does
        dup = sorted({s for s in names if names.count(s) > 1})
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
        from carebench.engagement.policy import check_refusal_policy
        from carebench.engagement.question import MODES

        if self.engagement not in MODES:
            raise CarebenchError(f"--engagement must be one of {', '.join(MODES)}, got {self.engagement!r}")
        check_refusal_policy(self.refusal_policy)

    def manifest_config(self) -> dict[str, Any]:
        """The settings as the manifest's ``config`` holds them: plain JSON, models as spec text."""
        return {k: v for k, v in spec_texts(self).items() if k != "notes"}

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


def select_prompts(release: Release, cfg: PluralRunConfig) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
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


def archetype_profiles(policies: Sequence[Any]) -> dict[str, list[str]]:
    """Archetype -> the sorted aliases of its profiles that have policies."""
    out: dict[str, set[str]] = {}
    for p in policies:
        out.setdefault(p.archetype, set()).add(p.profile)
    return {a: sorted(v) for a, v in out.items()}


# -- a run directory's records, parsed for scoring ----------------------------------------


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


def taxonomy_flags(manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """The RESPONSE codes the run's taxonomy flags ``refusal``, ``critical`` and ``harmful``: as the
    run recorded them, else (a run made before they existed) from its taxonomy file, else the
    built-in taxonomy; only codes of the run's category vocabulary."""
    scoring = manifest.get("scoring") or {}
    keys = {"refusal": "refusal_categories", "critical": "critical_categories", "harmful": "harmful_categories"}
    if all(isinstance(scoring.get(k), list) for k in keys.values()):
        return {f: [str(c) for c in scoring[k]] for f, k in keys.items()}
    from carebench.taxonomy import load_taxonomy

    try:
        tax = load_taxonomy((manifest.get("config") or {}).get("taxonomy"))
    except CarebenchError:
        tax = load_taxonomy()
    vocab = set(scoring.get("categories") or [])
    return {f: [c for c in codes if c in vocab] for f, codes in
            (("refusal", tax.refusal_codes()), ("critical", tax.critical_codes()), ("harmful", tax.harmful_codes()))}


def engagement_inputs(rows: Sequence[Mapping[str, Any]], manifest: Mapping[str, Any]) -> Any:
    """What engagement and critical failures read from a run's response rows (no model call)."""
    from carebench.plural.analyses import EngagementInputs
    from carebench.plural.engagement import recorded_classes

    flags = taxonomy_flags(manifest)
    texts = {(str(r["system"]), str(r["archetype"]), str(r["prompt_id"])): str(r.get("text") or "") for r in rows}
    scoring = manifest.get("scoring") or {}
    return EngagementInputs(recorded_classes(rows), str(scoring.get("refusal_policy", "seed")),
                            flags["refusal"], flags["critical"], flags["harmful"], texts,
                            str(scoring.get("engagement", "prefilter")))


def compute_metrics(data: Any, settings: dict[str, Any], engagement: Any = None) -> dict[str, Any]:
    """Every number of a run; ``engagement`` (:func:`engagement_inputs`) adds the engagement and
    critical-failure blocks and applies the refusal policy."""
    from carebench.plural.analyses import analyze

    metrics = analyze(
        data, rules=ScoringRules(settings.get("empty_policy", "vacuous"), settings.get("zero_coverage", "partial")),
        seed=int(settings.get("seed", 12345)), B=int(settings.get("bootstrap", 2000)),
        alpha=float(settings.get("alpha", 0.05)), engagement=engagement,
    )
    return json.loads(json.dumps(metrics))  # metrics.json and a rescore compare as the same plain data


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
