"""The fixed diagnostic sample every system and archetype answers (VEILED-SH, §5.3).

The paper draws 2,001 non-calibration prompts (about 20% of the release),
reserving examples at each NSSI and suicidal severity level and weighting the
rest toward uncommon contexts, sources, intents and functions. It gives no
formula, so ours is (all settings recorded in the sample's manifest):

1. **Reserve.** For each severity field (NSSI, suicidal) and level 1-5, the
   candidates are the prompts that *any* profile assigns that level. Levels are
   served round-robin, rarest first (fewest candidates), one seeded draw per
   level per round, for ``reserve`` rounds or until the sample is full, so every
   level that occurs is represented before any level gets a second item.
2. **Weighted fill.** Every other prompt gets a rarity score per feature:
   context, source group, intent and function (intent and function are the
   union of codes over all profiles). A feature's score is ``N / count(v)`` for
   the prompt's rarest value ``v`` (counts over the release), divided by its
   mean over the release, so each feature averages 1. The prompt's weight is the
   mean of its four scores raised to ``weighting`` (1 by default; 0 gives a
   uniform draw). The remaining places are drawn without replacement with
   probability proportional to weight (numpy ``Generator.choice``).

Defaults: ``fraction`` 0.2 of the release (10,003 x 0.2 -> 2,001, the paper's
size), seed 12345, ``reserve`` 3 rounds.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from carebench.types import CarebenchError

SEVERITY_FIELDS = (("nssi", "nssi_severity"), ("suicidal", "suicidal_severity"))
LEVELS = (1, 2, 3, 4, 5)
FEATURES = ("context", "source_group", "intent", "function")

DEFAULT_FRACTION = 0.2
DEFAULT_SEED = 12345
DEFAULT_RESERVE = 3


@dataclass(frozen=True)
class PolicySampleConfig:
    size: int | None = None  # absolute size; overrides fraction
    fraction: float = DEFAULT_FRACTION
    seed: int = DEFAULT_SEED
    reserve: int = DEFAULT_RESERVE
    weighting: float = 1.0

    def target(self, n_release: int) -> int:
        if self.size is not None:
            if self.size < 1:
                raise CarebenchError(f"--size must be at least 1, got {self.size}")
            return min(self.size, n_release)
        if not 0 < self.fraction <= 1:
            raise CarebenchError(f"--fraction must be in (0, 1], got {self.fraction}")
        return max(1, min(n_release, round(self.fraction * n_release)))

    def validate(self) -> None:
        if self.reserve < 0:
            raise CarebenchError(f"--reserve must be 0 or more, got {self.reserve}")
        if self.weighting < 0:
            raise CarebenchError(f"--weighting must be 0 or more, got {self.weighting}")


@dataclass(frozen=True)
class SampledPrompt:
    prompt_id: str
    reason: str  # "reserved nssi=3" | "weighted"
    weight: float

    def to_dict(self) -> dict[str, Any]:
        return {"prompt_id": self.prompt_id, "reason": self.reason, "weight": round(self.weight, 10)}


def prompt_features(prompts: Sequence[Any], policies: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per prompt id: context, source group, intent/function code sets and severity levels
    (unions over all profiles' policies)."""
    feats: dict[str, dict[str, Any]] = {
        p.id: {"context": {p.context}, "source_group": {p.source_group}, "intent": set(), "function": set(),
               "nssi": set(), "suicidal": set()}
        for p in prompts
    }
    for pol in policies:
        f = feats.get(pol.prompt_id)
        if f is None:
            continue
        f["intent"].update(pol.intent)
        f["function"].update(pol.function)
        for name, attr in SEVERITY_FIELDS:
            level = getattr(pol, attr)
            if level:
                f[name].add(int(level))
    return feats


def rarity_weights(ids: Sequence[str], feats: dict[str, dict[str, Any]], weighting: float = 1.0) -> np.ndarray:
    """The weighted-fill weight of each prompt (see the module docstring)."""
    n = len(ids)
    scores = np.zeros((len(FEATURES), n))
    for k, name in enumerate(FEATURES):
        count = Counter(v for i in ids for v in feats[i][name])
        for r, i in enumerate(ids):
            values = feats[i][name]
            scores[k, r] = max((n / count[v] for v in values), default=1.0)
        scores[k] /= scores[k].mean()
    return scores.mean(axis=0) ** weighting


def draw_sample(prompts: Sequence[Any], policies: Iterable[Any], cfg: PolicySampleConfig) -> list[SampledPrompt]:
    """The diagnostic sample, in draw order (reserved items first)."""
    cfg.validate()
    if not prompts:
        raise CarebenchError("the release holds no prompts to sample from")
    ids = sorted(p.id for p in prompts)
    feats = prompt_features(prompts, policies)
    target = cfg.target(len(ids))
    rng = np.random.default_rng(cfg.seed)
    chosen: dict[str, SampledPrompt] = {}
    candidates: dict[tuple[str, int], list[str]] = defaultdict(list)
    for i in ids:
        for name, _ in SEVERITY_FIELDS:
            for level in feats[i][name]:
                candidates[(name, level)].append(i)
    order = sorted(candidates, key=lambda key: (len(candidates[key]), key))
    for _ in range(cfg.reserve):
        for name, level in order:
            if len(chosen) >= target:
                break
            free = [i for i in candidates[(name, level)] if i not in chosen]
            if free:
                pick = free[int(rng.integers(len(free)))]
                chosen[pick] = SampledPrompt(pick, f"reserved {name}={level}", 0.0)
    weights = rarity_weights(ids, feats, cfg.weighting)
    rest = [k for k, i in enumerate(ids) if i not in chosen]
    need = target - len(chosen)
    if need > 0 and rest:
        w = weights[rest]
        picks = rng.choice(len(rest), size=min(need, len(rest)), replace=False, p=w / w.sum())
        for k in picks:
            i = ids[rest[int(k)]]
            chosen[i] = SampledPrompt(i, "weighted", float(weights[rest[int(k)]]))
    return list(chosen.values())


def composition(prompts: Sequence[Any], policies: Iterable[Any], sample_ids: Iterable[str]) -> dict[str, Any]:
    """Counts per feature value in the release and in the sample (for the sample report)."""
    feats = prompt_features(prompts, policies)
    picked = set(sample_ids)
    out: dict[str, Any] = {"release": len(feats), "sample": len(picked)}
    for name in (*FEATURES, "nssi", "suicidal"):
        rel = Counter(v for f in feats.values() for v in f[name])
        sam = Counter(v for i, f in feats.items() if i in picked for v in f[name])
        out[name] = {str(v): {"release": rel[v], "sample": sam.get(v, 0)} for v in sorted(rel, key=str)}
    return out
