"""``--dry-run`` for construct commands: the shared plan shape (:class:`carebench.engine.skeleton.Plan`).

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

from carebench.engine import planning
from carebench.engine.planning import filler
from carebench.engine.run import Run
from carebench.engine.runner import Call
from carebench.engine.skeleton import Plan

#: what a worst-case reply says, by the stage's task (JSON answers must parse and keep rows going)
_CLASSIFIER = json.dumps({"relevant": True, "intent": []})
_PICK = json.dumps({"choice": 1})
_VERDICT = json.dumps({"severity_preserved": True, "no_leakage": True, "format_ok": True, "factual": 5,
                       "persona_fit": 5, "style": 5, "context_fit": 5, "naturalness": 5, "rationale": ""})
_GUESSED = ("later prompts depend on earlier answers: where the cache has no answer yet, the plan "
            "assumes the worst case (every row retained and released, replies that fill their "
            "output cap, every gate passed, the configurations with the most models), so "
            "stages marked upper_bound give at most that many calls")


def worst_case_reply(stage: str, call: Call, n: int) -> str:
    """The worst-case answer to the ``n``-th call a dry run could not find in the cache."""
    if stage == "screening classifier":
        return _CLASSIFIER
    if stage == "persona sketches":
        return json.dumps({"sketch": filler(call, n)[:-40]})
    if stage == "persona picks":
        return _PICK
    if stage.endswith("judge"):
        return _VERDICT
    return filler(call, n)  # rewrites and revisions


class PlanningRun(planning.PlanningRun):
    """Stands in for the run during a construct dry run (see the module docstring and
    :class:`carebench.engine.planning.PlanningRun`)."""

    def __init__(self, run: Run):
        super().__init__(run, worst_case_reply)

    def exact(self, stage: str) -> bool:
        # a pick's prompt lists the nearest personas: a guess once any vector was
        exact = not self.guessed and not (stage == "persona picks" and self._zeroed)
        if not exact and stage == "persona picks":
            self.guessed = True  # the persona each row gets, and so every later prompt
        return exact

    def plan(self, suite: str, notes: Sequence[str] = (), guess_note: str = _GUESSED) -> Plan:
        return super().plan(suite, notes, guess_note)

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
