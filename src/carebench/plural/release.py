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

This module holds the configs, the leakage rule, the metrics and the release writer;
the command objects (:class:`~carebench.plural.commands.freeze.FreezeCommand`,
:class:`~carebench.plural.commands.label.LabelCommand`) are in :mod:`carebench.plural.commands`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from carebench.engine.rundir import read_json, write_json, write_jsonl
from carebench.fileio import atomic_write_text
from carebench.plural.profiles import Profile
from carebench.plural.runs import CommandOptions
from carebench.types import CarebenchError

ALIAS_PREFIX = {"peer": "P", "clinician": "C"}
PRIVATE = "private"


def method_overrides(values: list[str] | None) -> dict[str, str]:
    """``--method ARCHETYPE=METHOD`` values as archetype -> method."""
    out = {}
    for v in values or []:
        k, sep, m = v.partition("=")
        if not sep or not k or not m:
            raise CarebenchError(f"--method expects ARCHETYPE=METHOD (e.g. peer=E5), got {v!r}")
        if k.strip() not in ALIAS_PREFIX:  # an override no archetype would use, silently
            raise CarebenchError(f"--method {v}: unknown archetype {k.strip()!r}; known: {', '.join(ALIAS_PREFIX)}")
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
