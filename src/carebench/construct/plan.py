"""``--dry-run`` for construct commands: the shared plan shape (:class:`carebench.experiment.Plan`).

Construction is a chain: sketches feed the persona picks, drafts feed revisions
and the judge, screening decides which rows go on. A dry run therefore walks the
real chain with :class:`PlanningRun` in place of the run. Each batch is recorded
under its stage; a call the cache already answers gets its cached reply (so the
chain follows what will really happen), any other call gets a *worst-case*
reply, one that keeps every row going and fills the call's output cap:

* the screening classifier calls every row relevant (most rows retained);
* sketches, rewrites and revisions are as long as the output cap allows (the
  longest later prompts);
* the persona pick takes the first candidate (local embedders run as in the real
  run, so with cached sketches the candidates are the real ones; an API embedder's
  uncached vectors are zeros, so its candidates are a guess);
* the construction judge passes every gate, and the final rewrites go to the
  configurations with the most models (fusion makes more calls per row).

A stage whose requests depend on such a reply is marked ``"exact": false`` and
``"upper_bound": true``: its call count is at most the plan's, and its cost is
estimated from output caps (or from the cached replies of the same model). The
costs themselves are the runner's estimates (``Run.plan``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from carebench.experiment import Plan, PlanStage
from carebench.run import Run
from carebench.runner import Call, RunResult, call_key
from carebench.types import Completion

#: what a worst-case reply says, by the stage's task (JSON answers must parse and keep rows going)
_CLASSIFIER = json.dumps({"relevant": True, "intent": []})
_PICK = json.dumps({"choice": 1})
_VERDICT = json.dumps({"severity_preserved": True, "no_leakage": True, "format_ok": True, "factual": 5,
                       "persona_fit": 5, "style": 5, "context_fit": 5, "naturalness": 5, "rationale": ""})


def _filler(call: Call, n: int) -> str:
    """Text as long as the call's output cap allows (about four characters per token),
    numbered: two answers are never the same text, so later prompts built from them are
    never merged as one call."""
    return f"{n} " + "x" * (4 * (call.request.max_tokens or 1000) - len(str(n)) - 1)


def worst_case_reply(stage: str, call: Call, n: int) -> str:
    """The worst-case answer to the ``n``-th call a dry run could not find in the cache."""
    if stage == "screening classifier":
        return _CLASSIFIER
    if stage == "persona sketches":
        return json.dumps({"sketch": _filler(call, n)[:-40]})
    if stage == "persona picks":
        return _PICK
    if stage.endswith("judge"):
        return _VERDICT
    return _filler(call, n)  # rewrites and revisions


class PlanningRun:
    """Stands in for the run during a dry run (see the module docstring): records every
    batch under its stage and answers it from the cache or with a worst-case reply,
    never calling a model and never writing the cache."""

    def __init__(self, run: Run):
        self.run = run
        self.options = run.options
        self.cache = run.cache
        self.batches: list[tuple[str, list[Call], bool]] = []  # stage, calls, exact
        self.guessed = False  # a worst-case reply was given: later requests are estimates
        self.guessed_stages: set[str] = set()  # stages answered (partly) with worst-case replies
        self._zeroed, self._width = False, 1  # API embeddings: placeholders given / vector width
        self._answered = 0  # worst-case replies given so far

    def model(self, spec: str, **options: Any) -> Any:
        return self.run.model(spec, **options)

    def calls(self, calls: Sequence[Call], description: str = "", *, stage: str | None = None) -> RunResult:
        stage = stage or description
        # a pick's prompt lists the nearest personas: a guess once any vector was
        exact = not self.guessed and not (stage == "persona picks" and self._zeroed)
        self.batches.append((stage, list(calls), exact))
        if not exact and stage == "persona picks":
            self.guessed = True  # the persona each row gets, and so every later prompt
        hits = [self.cache.get(call_key(c)) if self.cache is not None else None for c in calls]
        if stage == "embeddings":
            return RunResult(self._vectors(calls, hits), calls=list(calls))
        out: list[Completion | None] = []
        for c, hit in zip(calls, hits, strict=True):
            if hit is None or hit.status != "ok":
                self.guessed = True
                self.guessed_stages.add(stage)
                self._answered += 1
                hit = Completion(text=worst_case_reply(stage, c, self._answered), model=str(c.model.spec),
                                 finish_reason="stop")
            out.append(hit)
        return RunResult(out, calls=list(calls))

    def _vectors(self, calls: Sequence[Call], hits: list[Completion | None]) -> list[Completion | None]:
        """API embeddings: the cached vectors while every one so far was cached, else zero
        vectors of the same width from then on (nearest personas are then a guess)."""
        if not self._zeroed and all(h is not None and h.status == "ok" for h in hits):
            if hits:
                self._width = len(hits[0].extra["embedding"])  # type: ignore[union-attr]
            return list(hits)
        self._zeroed = True
        self.guessed_stages.add("embeddings")
        return [Completion(extra={"embedding": [0.0] * self._width}, model=str(c.model.spec)) for c in calls]

    def plan(self, suite: str, notes: Sequence[str] = ()) -> Plan:
        """The recorded batches as the shared plan shape, one stage per stage name."""
        order: dict[str, tuple[list[Call], bool]] = {}
        for name, calls, exact in self.batches:
            prev, was_exact = order.get(name, ([], True))
            order[name] = (prev + calls, was_exact and exact)
        stages = [PlanStage(name, self.run.plan(calls), exact, upper_bound=not exact)
                  for name, (calls, exact) in order.items()]
        notes = list(notes)
        if any(not s.exact for s in stages):
            notes.append("later prompts depend on earlier answers: where the cache has no answer yet, the plan "
                         "assumes the worst case (every row retained and released, replies that fill their "
                         "output cap, every gate passed, the configurations with the most models), so "
                         "stages marked upper_bound give at most that many calls")
        return Plan(suite, stages, notes)


    def selection_known(self) -> bool:
        """Whether the selection's rewrites and verdicts all came from the cache."""
        return not any(s.startswith("selection") for s in self.guessed_stages)


def most_calls(configs: Sequence[Any]) -> list[str]:
    """The configurations with the most models (the most calls per row): a dry run's
    worst case for the final rewrites when the selection is not known yet."""
    top = max((len(c.models) for c in configs), default=0)
    return [c.name for c in configs if len(c.models) == top]


class PlanningEmbedder:
    """An API embedder in a dry run: its calls go through the planning run (recorded,
    never made). Its vectors may be placeholders, so the persona matrix built from them
    is never read from or written to the embedding cache (``cacheable``)."""

    cacheable = False

    def __init__(self, inner: Any):
        self.inner, self.name = inner, inner.name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode(texts)
