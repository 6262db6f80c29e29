"""E1 zero-shot and E2 few-shot profiles (VEILED-SH, Appendix B.2).

E1 is the shared judge with the taxonomy rubric as its only instruction; it does
not depend on the practitioner. E2 adds up to four demonstrations bootstrapped
from the fold's calibration cases, in the manner of DSPy's BootstrapFewShot: the
zero-shot judge labels the fold's cases, cases where its answer already reaches
an example F1 of at least 0.5 against the practitioner's labels are kept first (in
a seeded order), any remaining slots are filled with other fold cases, and each
demonstration shows the practitioner's own labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from carebench.plural.policy import example_f1
from carebench.plural.profiles.base import Env, FitData, Profile, new_profile, stable_seed
from carebench.plural.prompting import (
    DEFAULT_INSTRUCTION,
    Example,
    ProfilePrediction,
    label_request,
)

MAX_DEMOS = 4
BOOTSTRAP_THRESHOLD = 0.5


def predict_with(env: Env, jobs: Sequence[tuple[Profile, Sequence[Any]]], build, description: str):
    """Build one request per (profile, prompt), ask in one batch, regroup per job."""
    reqs = [build(profile, p) for profile, prompts in jobs for p in prompts]
    flat = env.predict_requests(reqs, "full", description)
    out, i = [], 0
    for _, prompts in jobs:
        out.append(flat[i : i + len(prompts)])
        i += len(prompts)
    return out


class ZeroShot:
    name = "E1"
    title = "zero-shot"
    freezable = True

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        return [new_profile(self.name, d, env, DEFAULT_INSTRUCTION) for d in data]

    def predict(self, jobs, env: Env) -> list[list[ProfilePrediction]]:
        return predict_with(
            env, jobs,
            lambda pr, p: label_request(env.taxonomy, env.contexts, p, instruction=pr.instruction),
            "E1 predictions",
        )


class FewShot:
    name = "E2"
    title = "few-shot"
    freezable = True

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        all_cases = {c.id: c for d in data for c in d.cases}
        ids = sorted(all_cases)
        traces = dict(zip(ids, env.zero_shot([all_cases[i] for i in ids]), strict=True))
        out = []
        for d in data:
            rng = np.random.default_rng(stable_seed(env.seed, "E2", d.practitioner, d.fold))
            order = [d.cases[i].id for i in rng.permutation(len(d.cases))]
            passing = [c for c in order
                       if example_f1(d.gold[c].labels(), traces[c].labels()) >= BOOTSTRAP_THRESHOLD]
            demos = (passing + [c for c in order if c not in passing])[:MAX_DEMOS]
            out.append(new_profile(self.name, d, env, DEFAULT_INSTRUCTION, demos=demos,
                                   extra={"bootstrapped": [c for c in demos if c in passing]}))
        return out

    def predict(self, jobs, env: Env) -> list[list[ProfilePrediction]]:
        def build(pr: Profile, p: Any):
            ex = [Example(env.prompts[c], pr.gold_policy(c)) for c in pr.demos]
            return label_request(env.taxonomy, env.contexts, p, instruction=pr.instruction, examples=ex)

        return predict_with(env, jobs, build, "E2 predictions")
