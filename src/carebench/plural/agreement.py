"""``plural agreement``: label distributions and agreement (VEILED-SH, Appendix C).

Tables 10/11: label prevalence (% of released prompts) and mean policy size
(RESPONSE categories per policy) for each profile. Tables 12/13: per-label
Gwet AC1 on binary presence, among an archetype's practitioners on the
calibration cases (skipped cases are missing ratings) beside among its profiles
on the released prompts; mean pairwise Jaccard of complete label sets for both.
The two populations differ, as in the paper, so the comparison is descriptive.
No model is called. The command object
(:class:`~carebench.plural.commands.agreement.AgreementCommand`) is in :mod:`carebench.plural.commands`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.engine.options import RunOptions
from carebench.engine.rundir import read_json
from carebench.plural.data import ARCHETYPES, resolve
from carebench.plural.policy import Policy
from carebench.plural.runs import no_call_options
from carebench.stats import gwet_ac1, mean_pairwise_jaccard
from carebench.types import CarebenchError

LabelSet = frozenset[str] | None


def per_label_ac1(raters: Sequence[Sequence[LabelSet]], labels: Sequence[str]) -> dict[str, float]:
    """AC1 of each label's presence/absence across raters; ``raters[r][i]`` None = not rated."""
    n = {len(r) for r in raters}
    if len(raters) < 2 or len(n) != 1:
        raise CarebenchError("per-label agreement needs two or more raters over the same items")
    out = {}
    for lab in labels:
        m = np.array([[np.nan if s is None else float(lab in s) for s in r] for r in raters]).T
        rated = (~np.isnan(m)).sum(axis=1) >= 2
        out[lab] = float(gwet_ac1(m[rated], k=2)) if rated.any() else float("nan")
    return out


def prevalence(sets: Sequence[frozenset[str]], labels: Sequence[str]) -> dict[str, float]:
    return {lab: 100.0 * float(np.mean([lab in s for s in sets])) for lab in labels}


@dataclass
class AgreementConfig:
    release: str
    annotations: str = "builtin"
    taxonomy: str | None = None
    #: the run context's settings (agreement makes no call, but runs like every command;
    #: --budget is accepted for symmetry)
    options: RunOptions = field(default_factory=no_call_options)


def agreement_records(release: Path, annotations: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One record per label set (the practitioners' on the calibration cases, the profiles'
    on the released prompts) and the release's metadata."""
    from carebench.datasets.prompts import load_annotations, load_policies

    if not (release / "policies.jsonl").is_file():
        raise CarebenchError(f"{release} is not a release directory (no policies.jsonl; run `plural label`)")
    meta = read_json(release / "metadata.json") if (release / "metadata.json").is_file() else {}
    records = [{"population": "practitioners", "archetype": a.archetype, "rater": a.practitioner,
                "item": a.case_id, "policy": None if a.skipped else Policy.of(a).to_dict()}
               for a in load_annotations(resolve(annotations, "annotations.jsonl"))]
    records += [{"population": "profiles", "archetype": p.archetype, "rater": p.profile, "item": p.prompt_id,
                 "policy": Policy.of(p).to_dict()} for p in load_policies(release / "policies.jsonl")]
    return records, meta


def agreement_metrics(records: list[dict[str, Any]], labels: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"prevalence": {}, "ac1": {}, "jaccard": {}}
    archetypes = [a for a in ARCHETYPES if any(r["archetype"] == a for r in records)]
    for pop in ("practitioners", "profiles"):
        rows = [r for r in records if r["population"] == pop]
        for arch in archetypes:
            mine = [r for r in rows if r["archetype"] == arch]
            raters = sorted({r["rater"] for r in mine})
            items = sorted({r["item"] for r in mine})
            grid: dict[str, dict[str, LabelSet]] = {rt: dict.fromkeys(items) for rt in raters}
            for r in mine:
                grid[r["rater"]][r["item"]] = None if r["policy"] is None else Policy.of(r["policy"]).labels()
            sets = [[grid[rt][i] for i in items] for rt in raters]
            key = f"{pop}/{arch}"
            if len(raters) >= 2:
                out["ac1"][key] = per_label_ac1(sets, labels)
                out["jaccard"][key] = mean_pairwise_jaccard(sets)
            if pop == "profiles":
                for rt in raters:
                    got = [Policy.of(r["policy"]) for r in mine if r["rater"] == rt]
                    out["prevalence"][rt] = {
                        "archetype": arch, "n": len(got),
                        "labels": prevalence([p.labels() for p in got], labels),
                        "mean_policy_size": float(np.mean([p.size() for p in got])) if got else float("nan"),
                    }
            out.setdefault("raters", {})[key] = {"raters": raters, "items": len(items)}
    return out
