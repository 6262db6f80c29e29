"""E0: nearest-neighbour floor (VEILED-SH, Appendix B.2).

Embed the prompt with the shared embedder and copy the labels of the single most
similar calibration case. No model call and no rationale, so it cannot be frozen;
it only sets the margin the other methods must beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from carebench.plural.profiles.base import Env, FitData, Profile, new_profile
from carebench.plural.prompting import DEFAULT_INSTRUCTION, ProfilePrediction


class NearestNeighbour:
    name = "E0"
    title = "nearest-neighbour floor"
    freezable = False

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        return [new_profile(self.name, d, env, DEFAULT_INSTRUCTION) for d in data]

    def predict(self, jobs: Sequence[tuple[Profile, Sequence[Any]]], env: Env) -> list[list[ProfilePrediction]]:
        out = []
        for profile, prompts in jobs:
            pool = [env.prompts[c] for c in profile.fit_cases]
            preds = []
            for p in prompts:
                (hit,) = env.nearest(p, pool, 1)
                preds.append(ProfilePrediction(profile.gold_policy(hit.id), rationale=f"nearest calibration case {hit.id}"))
            out.append(preds)
        return out
