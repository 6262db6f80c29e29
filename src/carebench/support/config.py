"""The ``support run`` command's settings and the reading of support run directories.

:class:`SupportRunConfig` is what ``carebench support run`` takes; :func:`load_run`
and :func:`load_records` read a run directory's records back and
:func:`support_metrics` scores them. The skeleton objects that run, score and
render every support command live in :mod:`carebench.support.suite`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.engine.options import RunOptions, run_options
from carebench.engine.rundir import read_json
from carebench.judging import JUDGE_MAX_TOKENS
from carebench.models.base import SpecLike, spec_texts
from carebench.support.generation import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE
from carebench.support.records import REFERENCE, ResponseRecord, VerdictRecord, read_run_rows
from carebench.support.tasks import Task, load_tasks
from carebench.types import CarebenchError

SUITE = "support"
SCOPE_CHOICES = ("final", "anywhere", "both")


@dataclass
class SupportRunConfig:
    """``responders`` and ``judges`` are the ``ModelSpec`` objects the command line was parsed
    into (a spec's text, e.g. from a script, is parsed by ``Run.model``); the manifest holds
    their text (:meth:`manifest_config`)."""

    tasks: str
    responders: list[SpecLike]
    judges: list[SpecLike]
    attempts: int = 3
    scope: str = "final"  # final | anywhere | both (both judges twice; metrics use final)
    system_prompt_file: str | None = None
    include_reference: bool = False
    seed: int = 12345
    bootstrap: int = 2000
    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    caps: dict[str, int] = field(default_factory=dict)
    responder_options: list[str] = field(default_factory=list)  # SPEC:key=value (Appendix G)
    responder_settings_file: str | None = None  # .toml/.json table of settings per responder
    recollect_truncated: bool = False  # ask truncated replies again with a larger cap (Appendix G)
    recollect_cap: int | None = None  # that cap; None = twice the responder's cap
    judge_temperature: float = 0.0
    judge_max_tokens: int = JUDGE_MAX_TOKENS
    task_limit: int | None = None  # first N tasks only (demo / smoke runs)
    task_ids: list[str] | None = None  # only these tasks, in this order
    columns: str | None = None  # field=column mapping of the task file (--columns)
    subcategories_file: str | None = None  # expected subcategory names; others are warned about
    split: str = "all"  # public | private | all (§A.3 stratified split when the file has none)
    title: str = "Support: rubric-scored crisis support"
    notes: list[str] = field(default_factory=list)
    families: dict[str, str] = field(default_factory=dict)  # --family SPEC=NAME overrides
    #: task file format (--format): carebench, or healthbench (HealthBench-style JSONL)
    task_format: str = "carebench"
    axes_map: str | None = None  # --format healthbench: YAML axis -> dimension map (None: built-in)
    subcategory_tag: str = "theme"  # --format healthbench: example tag prefix giving the subcategory
    #: --score: carebench (the weighted score only), or healthbench (HealthBench's
    #: subtract-and-clip score too, in metrics.json and the report)
    score: str = "carebench"
    #: --locale: the BCP-47 locale of every task without its own (None: such tasks have none)
    locale: str | None = None
    #: --resources: the crisis-resource registry replies are checked against (None: built-in)
    resources: str | None = None
    #: --engagement: how each final reply gets its engagement class (carebench.engagement):
    #: prefilter (no model call, the default: the seed's calls unchanged) or judge (the panel is asked)
    engagement: str = "prefilter"
    #: --refusal-policy: what a refusal or deflection scores (seed: unchanged; zero: 0)
    refusal_policy: str = "seed"
    #: --critical-min-weight: negative criteria at least this heavy are critical (None: the
    #: heaviest negative weight of the task set; support.critical)
    critical_min_weight: float | None = None
    #: the shared run flags (--out, --cache, --budget, ...; --retries is ``run.max_retries``)
    options: RunOptions = field(default_factory=run_options)

    def validate(self) -> None:
        if not self.responders and not self.include_reference:
            raise CarebenchError("give at least one --responder (or --include-reference)")
        if not self.judges:
            raise CarebenchError("give at least one --judge (DistressBench's panel has three)")
        if self.attempts < 1:
            raise CarebenchError(f"--attempts must be at least 1, got {self.attempts}")
        if self.scope not in SCOPE_CHOICES:
            raise CarebenchError(f"--scope must be one of {', '.join(SCOPE_CHOICES)}, got {self.scope!r}")
        names = [str(r) for r in self.responders]
        refuse_reference(names)
        dup = sorted({r for r in names if names.count(r) > 1})
        if dup:
            raise CarebenchError(f"responder listed twice: {dup[0]}")
        if self.max_tokens < 1 or any(v < 1 for v in self.caps.values()):
            raise CarebenchError("output caps must be positive token counts")
        check_score(self.score)
        from carebench.engagement.policy import check_refusal_policy
        from carebench.engagement.question import MODES

        if self.engagement not in MODES:
            raise CarebenchError(f"--engagement must be one of {', '.join(MODES)}, got {self.engagement!r}")
        check_refusal_policy(self.refusal_policy)
        from carebench.resources.options import run_locale

        self.locale = run_locale(self.locale)

    def manifest_config(self) -> dict[str, Any]:
        """The settings as the manifest's ``config`` holds them: plain JSON, models as spec text."""
        return {k: v for k, v in spec_texts(self).items() if k != "notes"}

    def load_tasks(self) -> list[Task]:
        """Every task of the task source in its format (every row validated)."""
        from carebench.support.healthbench_tasks import load_task_source

        return load_task_source(self.tasks, task_format=self.task_format, columns=self.columns,
                                axes_map=self.axes_map, subcategory_tag=self.subcategory_tag)


#: what ``--score`` offers: carebench's weighted score alone, or HealthBench's beside it
SCORE_CHOICES = ("carebench", "healthbench")


def check_score(score: str) -> None:
    if score not in SCORE_CHOICES:
        raise CarebenchError(f"--score must be one of {', '.join(SCORE_CHOICES)}, got {score!r}")


def metrics_scope(scope: str) -> str:
    """The scope the headline metrics use (``both`` keeps final-turn as primary, §B.9)."""
    return "anywhere" if scope == "anywhere" else "final"


def judged_scopes(scope: str) -> tuple[str, ...]:
    return ("final", "anywhere") if scope == "both" else (scope,)


# -- reading a run directory ----------------------------------------------------------------


def incomplete_message(run_dir: Path) -> str | None:
    """One line for an incomplete run (harness failures), or None when it is complete."""
    m = read_json(Path(run_dir) / "manifest.json")
    f = m.get("harness_failures") or {}
    if m.get("status") != "incomplete" or not any(f.values()):
        return None
    return (f"run incomplete: {f.get('responder_calls', 0)} responder call(s) and {f.get('judge_calls', 0)} "
            f"judge call(s) failed after every retry; those conversations are excluded from the scores "
            f"and counted. Re-run the same command to retry them")


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[Task], list[ResponseRecord], list[VerdictRecord]]:
    """Manifest, tasks, responses and verdicts of a run directory (no model needed)."""
    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    if manifest.get("suite") != SUITE:
        raise CarebenchError(f"{run_dir} is a {manifest.get('suite')!r} run, not a support run")
    tasks = load_tasks(run_dir / "tasks.jsonl")
    responses, verdicts = load_records(run_dir)
    return manifest, tasks, responses, verdicts


def support_metrics(
    tasks: Sequence[Task],
    responses: Sequence[ResponseRecord],
    verdicts: Sequence[VerdictRecord],
    *,
    panel: Sequence[str] | None,
    scope: str,
    seed: int,
    bootstrap: int,
    family: dict[str, str] | None = None,
    score_as: str = "carebench",
    routed_local: set[tuple[str, str, int]] | None = None,
    engagement: dict[tuple[str, str, int], str | None] | None = None,
    refusal_policy: str = "seed",
    critical_min_weight: float | None = None,
) -> dict[str, Any]:
    """Every analysis of a run; ``score_as="healthbench"`` adds HealthBench's score
    (``metrics["healthbench"]``, see :mod:`carebench.support.healthbench`); ``engagement``
    the engagement rates and both refusal policies' scores (:mod:`carebench.support.engagement`)."""
    from carebench.support.analyses import analyze

    check_score(score_as)
    points = None
    if score_as == "healthbench":
        from carebench.support.healthbench import criterion_points

        points = criterion_points(tasks)
    # plain JSON data (``analyze`` cleans its result): metrics.json and a rescore compare equal
    return analyze(tasks, responses, verdicts, panel=list(panel) if panel else None,
                   scope=scope, seed=seed, B=bootstrap, family=family or None, healthbench_points=points,
                   routed_local=routed_local, engagement=engagement, refusal_policy=refusal_policy,
                   critical_min_weight=critical_min_weight)


def load_records(run_dir: Path, task_ids: set[str] | None = None) -> tuple[list[ResponseRecord], list[VerdictRecord]]:
    """Response and verdict records of a run, optionally only those of some tasks."""
    responses: list[ResponseRecord] = []
    verdicts: list[VerdictRecord] = []
    for row in read_run_rows(run_dir, task_ids):
        if row.get("kind") == "response":
            responses.append(ResponseRecord.from_dict(row))
        elif row.get("kind") == "verdict":
            verdicts.append(VerdictRecord.from_dict(row))
    return responses, verdicts


def refuse_reference(responders: list[str] | None) -> None:
    """``reference`` names the tasks' clinician references, never a responder model: refused
    (before it is read as a malformed spec) with the flag that includes the references."""
    if REFERENCE in (responders or []):
        raise CarebenchError("'reference' is reserved for the task references (use --include-reference)")
