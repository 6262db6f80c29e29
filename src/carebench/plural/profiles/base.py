"""What every profile method shares: the fit data, the frozen profile, the environment.

A method is fit on one practitioner's labelled calibration cases and predicts a
policy for any prompt (VEILED-SH, §5.2). Methods work in batches (many
practitioners and folds at once) so each round of model calls is one batch of the
command's run context (:class:`carebench.engine.run.Run`): cached, budgeted, logged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any, Protocol

import numpy as np

from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.models.base import ChatModel
from carebench.plural.policy import Policy
from carebench.plural.prompting import (
    ProfilePrediction,
    PromptStage,
    label_request,
    parse_prediction,
)
from carebench.plural.runs import answered
from carebench.types import Completion


@dataclass
class FitData:
    """One practitioner's labels on the cases a profile may learn from (skipped cases left out)."""

    practitioner: str
    archetype: str
    cases: list[Any]  # PromptRecord
    gold: dict[str, Policy]
    notes: dict[str, str] = field(default_factory=dict)
    fold: int | None = None  # None: fit on every calibration case (freezing)


@dataclass
class Profile:
    """A fitted method: everything needed to predict again, as plain JSON-able data."""

    method: str
    practitioner: str
    archetype: str
    model: str
    instruction: str
    fit_cases: list[str]
    gold: dict[str, dict[str, Any]]  # case id -> the practitioner's policy (private)
    demos: list[str] = field(default_factory=list)  # E2
    guidelines: list[str] = field(default_factory=list)  # E4; E5's second judge
    guidelines_interpret: list[str] = field(default_factory=list)  # E5's first judge
    fold: int | None = None
    alias: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: every case of the calibration set, skipped ones included (the leakage exclusion's set:
    #: a case every practitioner skipped was still shown to them); empty in older profiles
    calibration_cases: list[str] = field(default_factory=list)

    def gold_policy(self, case_id: str) -> Policy:
        return Policy.of(self.gold[case_id])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Profile:
        return cls(**d)

    def content_hash(self) -> str:
        """sha256 of the profile's content (what a frozen profile is identified by)."""
        d = self.to_dict()
        d.pop("alias", None)
        if not d.get("calibration_cases"):
            d.pop("calibration_cases", None)  # profiles frozen before the field keep their hash
        return hashlib.sha256(json.dumps(d, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class Env:
    """The shared judge, the command's run context and the vocabulary every method uses."""

    model: ChatModel | None
    run: Run
    taxonomy: Any
    contexts: dict[str, Any]
    prompts: dict[str, Any]  # id -> PromptRecord (calibration cases and prompts to label)
    embedder_spec: str | None = None
    seed: int = 12345
    #: the stage the run's accounting books these calls under (e.g. the method being fit)
    stage: str | None = None
    memalign_backend: str = "native"  # E4/E5 guideline distillation: native or mlflow
    _vectors: dict[str, np.ndarray] = field(default_factory=dict)
    _embedder: Any = None

    # -- model calls ------------------------------------------------------------------
    def ask(self, calls: Sequence[Call], description: str) -> list[Completion]:
        """One round through the run context: every answer, or CutShort / HarnessFailure."""
        if not calls:
            return []
        return answered(self.run.calls(calls, description, stage=self.stage or description), description)

    def predict_requests(self, requests: Sequence[Any], stage: PromptStage, description: str) -> list[ProfilePrediction]:
        calls = [Call(self.model, r, tag={"stage": stage}) for r in requests]
        return [parse_prediction(c, self.taxonomy, stage) for c in self.ask(calls, description)]

    def zero_shot(self, prompts: Sequence[Any], stage: PromptStage = "full") -> list[ProfilePrediction]:
        """The shared judge with the rubric only (E1); identical for every practitioner, so cached once."""
        reqs = [label_request(self.taxonomy, self.contexts, p, stage=stage) for p in prompts]
        return self.predict_requests(reqs, stage, f"zero-shot {stage} labels")

    # -- retrieval --------------------------------------------------------------------
    def vectors(self, prompts: Sequence[Any]) -> np.ndarray:
        """L2-normalised embeddings of the prompts' texts.

        The first use embeds every known prompt in one batch; vectors are kept per
        (embedder, text) for the process, so chained commands embed a text once.
        """
        if any(p.id not in self._vectors for p in prompts):
            everything = {p.id: p for p in [*self.prompts.values(), *prompts]}
            for pid, v in zip(everything, self.embed_texts([p.text for p in everything.values()]), strict=True):
                self._vectors[pid] = v
        return np.stack([self._vectors[p.id] for p in prompts])

    def embed_texts(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Embeddings of any texts with the run's embedder, kept per (embedder, text) for
        the process (the MLflow MemAlign backend embeds its memory through this too)."""
        if self._embedder is None:
            self._embedder = _embedder(self.embedder_spec, self.run)
        spec = self.embedder_spec or "builtin"
        todo = sorted({t for t in texts if (spec, t) not in _VECTORS})
        if todo:
            for text, v in zip(todo, self._embedder.encode(todo), strict=True):
                _VECTORS[(spec, text)] = np.asarray(v, dtype=float)
        return [_VECTORS[(spec, t)] for t in texts]

    def nearest(self, query: Any, pool: Sequence[Any], k: int) -> list[Any]:
        """The k pool prompts most similar to ``query`` (cosine; ties by pool order)."""
        pool = [p for p in pool if p.id != query.id]
        if not pool:
            return []
        sims = self.vectors(pool) @ self.vectors([query])[0]
        order = np.argsort(-sims, kind="stable")[:k]
        return [pool[i] for i in order]

    def embedder_name(self) -> str | None:
        return None if self._embedder is None else getattr(self._embedder, "name", None)


_VECTORS: dict[tuple[str, str], np.ndarray] = {}


def _embedder(spec: str | None, run: Run) -> Any:
    """API embeddings go through the run (stage ``embeddings``: cached, budgeted, logged); local
    encoders are loaded once per process."""
    from carebench.models.embed import load_embedder

    if spec is not None and str(spec).startswith("openai-embed:"):
        return load_embedder(spec, run=run, stage="embeddings")
    return _local_embedder(spec)


@cache
def _local_embedder(spec: str | None) -> Any:
    from carebench.models.embed import load_embedder

    return load_embedder(spec)


class ProfileMethod(Protocol):
    name: str
    title: str
    freezable: bool

    def fit(self, data: Sequence[FitData], env: Env) -> list[Profile]: ...

    def predict(self, jobs: Sequence[tuple[Profile, Sequence[Any]]], env: Env) -> list[list[ProfilePrediction]]: ...


def new_profile(method: str, d: FitData, env: Env, instruction: str, **kw: Any) -> Profile:
    return Profile(
        method=method, practitioner=d.practitioner, archetype=d.archetype, model=str(env.model.spec) if env.model is not None else "",
        instruction=instruction, fit_cases=[c.id for c in d.cases],
        gold={cid: p.to_dict() for cid, p in d.gold.items()}, fold=d.fold, **kw,
    )


def stable_seed(*parts: Any) -> int:
    """A seed derived from names (practitioner, fold...), stable across runs and machines."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")
