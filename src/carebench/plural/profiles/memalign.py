"""E4 memory-aligned judge and E5 cascade, implemented natively after MemAlign
(VEILED-SH, Appendix B.2).

E4 fit: the shared judge labels the fold's cases zero-shot (its traces); the
disagreements with the practitioner's labels, with the practitioner's notes, are
the feedback from which the shared judge (the reflection model) distils a short
list of guidelines (semantic memory). The fold's labelled cases are the episodic
memory. E4 predict: the rubric, the guidelines and the 5 calibration cases most
similar to the prompt (shared embedder) with the practitioner's labels.

E5 keeps that machinery but splits it in two aligned judges: judge A predicts
intent, severities and function without any response part (its own guidelines
and interpretation-only memories); judge B receives A's actual prediction and
predicts the complete policy. A failed judge A answer fails the case (B is not
asked), so an error is never hidden behind a later success.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from carebench.engine.runner import Call
from carebench.plural.profiles.base import Env, FitData, Profile, new_profile
from carebench.plural.profiles.prompted import predict_with
from carebench.plural.prompting import (
    DEFAULT_INSTRUCTION,
    MAX_TOKENS,
    TEMPERATURE,
    Example,
    ProfilePrediction,
    PromptStage,
    case_text,
    format_labels,
    label_request,
    rubric_text,
)
from carebench.types import ChatRequest, Message, StructuredSpec

RETRIEVAL_K = 5
MAX_GUIDELINES = 8
GUIDELINE_CHARS = 300
MAX_FEEDBACK_CASES = 12  # keeps the distillation prompt inside small models' context

DISTILL_INSTRUCTION = (
    "You help an automated labeller agree with one practitioner. Below are cases where the "
    "labeller's answer and the practitioner's labels are shown side by side, with any note the "
    "practitioner wrote. Write short, general guidelines (not case summaries) that would make "
    "the labeller choose the practitioner's labels in similar cases."
)

_GUIDELINE_SCHEMA = {
    "type": "object",
    "properties": {
        "guidelines": {"type": "array", "maxItems": MAX_GUIDELINES,
                       "items": {"type": "string", "maxLength": GUIDELINE_CHARS}},
    },
    "required": ["guidelines"],
    "additionalProperties": False,
}


def distill_request(env: Env, d: FitData, traces: dict[str, ProfilePrediction], stage: PromptStage) -> ChatRequest:
    """The reflection call: feedback on the fold's cases -> guidelines."""
    def differs(cid: str) -> bool:
        gold = d.gold[cid] if stage != "interpret" else d.gold[cid].interpretation()
        got = traces[cid].policy
        if got is not None and stage == "interpret":
            got = got.interpretation()
        return got != gold

    ids = [c.id for c in d.cases]
    chosen = ([c for c in ids if differs(c)] + [c for c in ids if not differs(c)])[:MAX_FEEDBACK_CASES]
    blocks = []
    for i, cid in enumerate(chosen, 1):
        tr = traces[cid]
        got = format_labels(tr.policy, stage) if tr.policy is not None else f"(failed: {tr.error})"
        lines = [f"Case {i}:", case_text(env.prompts[cid], env.contexts), f"Labeller: {got}",
                 f"Practitioner: {format_labels(d.gold[cid], stage)}"]
        if d.notes.get(cid):
            lines.append(f"Practitioner's note: {d.notes[cid]}")
        blocks.append("\n".join(lines))
    system = f"{DISTILL_INSTRUCTION}\n\n{rubric_text(env.taxonomy, stage)}"
    user = "\n\n".join(blocks) + f"\n\nAnswer with JSON: up to {MAX_GUIDELINES} guidelines."
    return ChatRequest(
        messages=(Message("system", system), Message("user", user)),
        temperature=TEMPERATURE, max_tokens=MAX_TOKENS,
        structured=StructuredSpec(kind="json", schema_json=json.dumps(_GUIDELINE_SCHEMA, sort_keys=True),
                                  name="guidelines"),
    )


def parse_guidelines(text: str) -> tuple[list[str], str | None]:
    from carebench.models.structured import extract_json

    try:
        obj = extract_json(text)
    except ValueError:
        return [], "no JSON object in the distillation answer"
    g = obj.get("guidelines") if isinstance(obj, dict) else None
    if not isinstance(g, list) or not all(isinstance(x, str) for x in g):
        return [], "distillation answer has no list of guidelines"
    return [x.strip()[:GUIDELINE_CHARS] for x in g if x.strip()][:MAX_GUIDELINES], None


def distill(env: Env, data: Sequence[FitData], stage: PromptStage) -> list[tuple[list[str], str | None]]:
    """Guidelines for each fit (one reflection call each), from the zero-shot traces."""
    all_cases = {c.id: c for d in data for c in d.cases}
    ids = sorted(all_cases)
    traces = dict(zip(ids, env.zero_shot([all_cases[i] for i in ids], stage), strict=True))
    calls = [Call(env.model, distill_request(env, d, traces, stage), tag={"stage": f"distill-{stage}"})
             for d in data]
    comps = env.ask(calls, f"guideline distillation ({stage})")
    return [parse_guidelines(c.text) if c.ok else ([], f"no usable answer ({c.status})") for c in comps]


def distilled(env: Env, data: Sequence[FitData], stage: PromptStage, suffix: str = "") -> list[tuple[list[str], dict[str, Any]]]:
    """Guidelines per fit from the run's backend, with what the profile records about them.

    ``mlflow`` (``--memalign-backend mlflow``) has MLflow's MemAlignOptimizer distil them;
    it also records which cases each guideline came from and the library versions."""
    if env.memalign_backend != "mlflow":
        return [(g, {f"distill_error{suffix}": err} if err else {}) for g, err in distill(env, data, stage)]
    from carebench.plural.profiles.memalign_mlflow import distill as mlflow_distill
    from carebench.plural.profiles.memalign_mlflow import versions as mlflow_versions

    backend = {"name": "mlflow", **mlflow_versions()}
    out = []
    for g, sources, err in mlflow_distill(env, data, stage):
        extra = {"backend": backend, f"guideline_sources{suffix}": sources}
        out.append((g, extra | ({f"distill_error{suffix}": err} if err else {})))
    return out


def memories(env: Env, profile: Profile, prompt: Any) -> list[Example]:
    pool = [env.prompts[c] for c in profile.fit_cases]
    return [Example(p, profile.gold_policy(p.id)) for p in env.nearest(prompt, pool, RETRIEVAL_K)]


class MemAlign:
    name = "E4"
    title = "memory-aligned judge (MemAlign)"
    freezable = True

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        return [new_profile(self.name, d, env, DEFAULT_INSTRUCTION, guidelines=g, extra=extra)
                for d, (g, extra) in zip(data, distilled(env, data, "full"), strict=True)]

    def predict(self, jobs, env: Env) -> list[list[ProfilePrediction]]:
        def build(pr: Profile, p: Any):
            return label_request(env.taxonomy, env.contexts, p, instruction=pr.instruction,
                                 guidelines=pr.guidelines, examples=memories(env, pr, p))

        return predict_with(env, jobs, build, f"{self.name} predictions")


class CascadedMemAlign:
    name = "E5"
    title = "cascaded memory-aligned judges"
    freezable = True

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]:
        a = distilled(env, data, "interpret", "_a")
        b = distilled(env, data, "full", "_b")
        return [new_profile(self.name, d, env, DEFAULT_INSTRUCTION, guidelines=gb, guidelines_interpret=ga,
                            extra=xa | xb)
                for d, (ga, xa), (gb, xb) in zip(data, a, b, strict=True)]

    def predict(self, jobs, env: Env) -> list[list[ProfilePrediction]]:
        flat = [(pr, p) for pr, prompts in jobs for p in prompts]
        reqs_a = [
            label_request(env.taxonomy, env.contexts, p, instruction=pr.instruction, stage="interpret",
                          guidelines=pr.guidelines_interpret, examples=memories(env, pr, p))
            for pr, p in flat
        ]
        first = env.predict_requests(reqs_a, "interpret", "E5 judge A")
        todo = [i for i, a in enumerate(first) if a.ok]
        reqs_b = [
            label_request(env.taxonomy, env.contexts, flat[i][1], instruction=flat[i][0].instruction,
                          guidelines=flat[i][0].guidelines, examples=memories(env, flat[i][0], flat[i][1]),
                          interpretation=first[i].policy)
            for i in todo
        ]
        second = dict(zip(todo, env.predict_requests(reqs_b, "full", "E5 judge B"), strict=True))
        preds = []
        for i, a in enumerate(first):
            if i in second:
                preds.append(second[i])
            else:
                preds.append(ProfilePrediction(None, f"judge A: {a.error}", a.rationale, a.raw))
        out, k = [], 0
        for _, prompts in jobs:
            out.append(preds[k : k + len(prompts)])
            k += len(prompts)
        return out

