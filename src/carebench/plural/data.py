"""Loading the plural inputs: prompts, practitioner annotations, taxonomy, contexts.

``builtin`` names carebench's illustrative data (written for carebench, not real
posts or annotations; see ``carebench/data/plural/meta.json``). Every file goes
through the core readers (file:line errors); the checks here are the ones that
need more than one row: annotations must name known prompts, a practitioner has
one archetype, and a practitioner's label that breaks a cross-field rule is an
error, never repaired.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.datasets.builtin import package_file
from carebench.plural.policy import Policy
from carebench.types import CarebenchError

BUILTIN = "builtin"
ARCHETYPES = ("peer", "clinician")


def builtin_path(name: str) -> Path:
    return package_file("plural", name)


def resolve(source: str | Path, name: str) -> Path:
    return builtin_path(name) if str(source) == BUILTIN else Path(source)


def is_builtin(source: str | Path) -> bool:
    return str(source) == BUILTIN


def load_vocabulary(taxonomy: str | None = None, contexts: str | None = None) -> tuple[Any, dict[str, Any]]:
    from carebench.taxonomy import load_contexts, load_taxonomy

    return load_taxonomy(taxonomy), load_contexts(contexts)


def load_prompt_file(source: str | Path) -> list[Any]:
    from carebench.datasets.prompts import load_prompts

    rows = load_prompts(resolve(source, "prompts.jsonl"))
    seen: set[str] = set()
    for r in rows:
        if r.id in seen:
            raise CarebenchError(f"{source}: prompt id {r.id!r} appears twice")
        seen.add(r.id)
    return rows


def check_contexts(prompts: list[Any], contexts: dict[str, Any], source: str | Path) -> None:
    for p in prompts:
        if p.context not in contexts:
            raise CarebenchError(
                f"{source}: prompt {p.id!r} has context {p.context!r}; known: {', '.join(sorted(contexts))}"
            )


@dataclass
class Calibration:
    """The calibration set: the prompts every practitioner labelled and their labels."""

    cases: list[Any]  # PromptRecord, sorted by id
    annotations: list[Any]
    practitioners: dict[str, str]  # practitioner -> archetype, sorted by name

    def by_archetype(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {a: [] for a in ARCHETYPES}
        for p, a in self.practitioners.items():
            out.setdefault(a, []).append(p)
        return {a: ps for a, ps in out.items() if ps}

    def gold(self, practitioner: str) -> dict[str, Policy]:
        """The practitioner's policy per case; skipped cases are left out."""
        return {a.case_id: Policy.of(a) for a in self.annotations
                if a.practitioner == practitioner and not a.skipped}

    def notes(self, practitioner: str) -> dict[str, str]:
        return {a.case_id: a.notes for a in self.annotations if a.practitioner == practitioner and a.notes}


def load_calibration(prompts: list[Any], annotations_source: str | Path, taxonomy: Any) -> Calibration:
    from carebench.datasets.prompts import load_annotations
    from carebench.plural.prompting import policy_problems

    rows = load_annotations(resolve(annotations_source, "annotations.jsonl"))
    if not rows:
        raise CarebenchError(f"{annotations_source}: no annotations")
    by_id = {p.id: p for p in prompts}
    arche: dict[str, str] = {}
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for i, a in enumerate(rows, 1):
        where = f"{annotations_source}: annotation {i} ({a.practitioner}, {a.case_id})"
        if a.case_id not in by_id:
            raise CarebenchError(f"{where}: case_id is not among the prompts")
        if arche.setdefault(a.practitioner, a.archetype) != a.archetype:
            raise CarebenchError(f"{where}: practitioner appears with two archetypes")
        seen[(a.practitioner, a.case_id)] += 1
        if seen[(a.practitioner, a.case_id)] > 1:
            raise CarebenchError(f"{where}: the practitioner labelled this case twice")
        if not a.skipped:
            problems = policy_problems(taxonomy, Policy.of(a))
            if problems:
                raise CarebenchError(f"{where}: invalid label combination: {problems[0]}")
    case_ids = sorted({a.case_id for a in rows})
    return Calibration([by_id[c] for c in case_ids], rows, dict(sorted(arche.items())))
