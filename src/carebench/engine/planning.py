"""Dry runs of chained commands: a stand-in for the run that answers without calling.

Some commands build later prompts from earlier answers (construct's sketches feed its
persona picks; the support probe's accounts feed new replies, which the panel then
judges), so their calls cannot be listed up front. A dry run of such a command runs
its real code against a :class:`PlanningRun`: every batch is recorded under its
stage; a call the cache already answers gets its cached reply (so the chain follows
what will really happen), any other call gets the caller's *worst-case* reply (one
that keeps the chain going and fills the call's output cap), and API embeddings get
the cached vectors while every one so far was cached, else zero vectors. Nothing is
called and the cache is never written.

A stage whose requests depend on such a reply is marked ``"exact": false`` and
``"upper_bound": true``; the costs are the runner's estimates (``Run.plan``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from carebench.engine.run import Run
from carebench.engine.runner import Call, RunResult, call_key
from carebench.engine.skeleton import Plan, PlanStage
from carebench.types import Completion

#: ``reply(stage, call, n)``: the worst-case text answering the ``n``-th uncached call
Reply = Callable[[str, Call, int], str]


def filler(call: Call, n: int) -> str:
    """Text as long as the call's output cap allows (about four characters per token),
    numbered: two answers are never the same text, so later prompts built from them are
    never merged as one call."""
    return f"{n} " + "x" * (4 * (call.request.max_tokens or 1000) - len(str(n)) - 1)


class PlanningRun:
    """Stands in for the run during a dry run (see the module docstring)."""

    def __init__(self, run: Run, reply: Reply, independent: Collection[str] = ()):
        """``independent``: stages whose requests never depend on earlier answers (exact
        whatever was guessed before them)."""
        self.run = run
        self.independent = frozenset(independent)
        self.options = run.options
        self.cache = run.cache
        self.reply = reply
        self.batches: list[tuple[str, list[Call], bool]] = []  # stage, calls, exact
        self.guessed = False  # a worst-case reply was given: later requests are estimates
        self.guessed_stages: set[str] = set()  # stages answered (partly) with worst-case replies
        self._zeroed, self._width = False, 1  # API embeddings: placeholders given / vector width
        self._answered = 0  # worst-case replies given so far

    def model(self, spec: str, **options: Any) -> Any:
        return self.run.model(spec, **options)

    def exact(self, stage: str) -> bool:
        """Whether a batch of ``stage`` starting now has exact requests (a hook)."""
        return stage in self.independent or not self.guessed

    def calls(self, calls: Sequence[Call], description: str = "", *, stage: str | None = None) -> RunResult:
        stage = stage or description
        self.batches.append((stage, list(calls), self.exact(stage)))
        hits = [self.cache.get(call_key(c)) if self.cache is not None else None for c in calls]
        if stage == "embeddings":
            return RunResult(self._vectors(calls, hits), calls=list(calls))
        out: list[Completion | None] = []
        for c, hit in zip(calls, hits, strict=True):
            if hit is None or hit.status != "ok":
                self.guessed = True
                self.guessed_stages.add(stage)
                self._answered += 1
                hit = Completion(text=self.reply(stage, c, self._answered), model=str(c.model.spec),
                                 finish_reason="stop")
            out.append(hit)
        return RunResult(out, calls=list(calls))

    def _vectors(self, calls: Sequence[Call], hits: list[Completion | None]) -> list[Completion | None]:
        """API embeddings: the cached vectors while every one so far was cached, else zero
        vectors of the same width from then on (what depends on them is then a guess)."""
        if not self._zeroed and all(h is not None and h.status == "ok" for h in hits):
            if hits:
                self._width = len(hits[0].extra["embedding"])  # type: ignore[union-attr]
            return list(hits)
        self._zeroed = True
        self.guessed_stages.add("embeddings")
        return [Completion(extra={"embedding": [0.0] * self._width}, model=str(c.model.spec)) for c in calls]

    def plan(self, suite: str, notes: Sequence[str] = (), guess_note: str = "") -> Plan:
        """The recorded batches as the shared plan shape, one stage per stage name;
        ``guess_note`` says what the worst case assumed, when any stage is estimated."""
        order: dict[str, tuple[list[Call], bool]] = {}
        for name, calls, exact in self.batches:
            prev, was_exact = order.get(name, ([], True))
            order[name] = (prev + calls, was_exact and exact)
        stages = [PlanStage(name, self.run.plan(calls), exact, upper_bound=not exact)
                  for name, (calls, exact) in order.items()]
        notes = list(notes)
        if guess_note and any(not s.exact for s in stages):
            notes.append(guess_note)
        return Plan(suite, stages, notes)
