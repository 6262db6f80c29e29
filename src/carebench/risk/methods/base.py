"""The contract every risk method implements, and the registry that names them.

A method turns items into per-item ``RiskPrediction``s. Model-backed methods issue their
calls through the command's run (:meth:`MethodContext.calls`, i.e. ``Run.calls`` under
the method's stage, so identical prompts are shared through the cache across methods
and every call is budgeted and logged); fitted methods predict out-of-fold or on a separate
training corpus. Failures are predictions with a non-ok status, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from carebench.engine.runner import Call, RunResult
from carebench.models.base import SpecLike
from carebench.types import CarebenchError, Usage

#: prediction statuses; only "ok" carries a level
#: a call failed every retry (server down, timeout, HTTP 5xx): the method is incomplete
HARNESS_FAILURE = "harness_failure"
PREDICTION_STATUSES = ("ok", "parse_error", "empty", "content_filter", "truncated", "error", "budget",
                       HARNESS_FAILURE)


@dataclass(frozen=True, slots=True)
class RiskItem:
    id: str
    text: str
    level: int  # 0..3 gold level; -1 (scale.NEGATIVE): no suicide-related content
    group: str | None = None  # resampling cluster (e.g. Reddit user)
    scores: dict[str, float] = field(default_factory=dict)  # moderation score columns, if given
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"recovered": True}
    stratum: str | None = None  # sampling stratum (bootstrap resamples within it)
    weight: float | None = None  # Horvitz-Thompson weight 1/inclusion probability; None = 1

    @property
    def negative(self) -> bool:
        """An item of the negative stratum: scored for detection, never for severity."""
        return self.level < 0


@dataclass(slots=True)
class RiskPrediction:
    item_id: str
    method: str
    level: int | None  # None on failure
    status: str = "ok"
    probs: list[float] | None = None  # per level, when the method gives them
    raw: str = ""  # raw model output (or a short description for fitted methods)
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0  # service time; critical path for multi-call methods
    queue_wait_s: float = 0.0  # time its calls waited in the client (slots, retries), summed
    cost_usd: float = 0.0
    priced: bool = True  # False when any call went to a model without a price
    n_calls: int = 0
    profile: dict[str, Any] | None = None  # 8-dimension clinical profile (schema methods)
    detail: dict[str, Any] = field(default_factory=dict)  # votes, fold, k, errors ...


@dataclass
class MethodContext:
    """What a method may use: the run (``carebench.engine.run.Run``: calls, cache, budget, models),
    its models by role, seeds, an optional training set and the stage its calls count under."""

    run: Any  # carebench.engine.run.Run; None for fitted methods that call no model
    models: dict[str, Any]  # role -> ChatModel; role "default" is the --model
    seed: int = 42
    train: Sequence[RiskItem] | None = None  # set for transfer (--train); else cross-validate
    n_folds: int = 5
    #: the run's model factory (one instance per spec, closed by the run); None -> ``run.model``
    get_model: Callable[[SpecLike], Any] | None = None
    #: the method's name in this run (its label, e.g. "llm" or "fewshot-k8"), for messages
    method: str | None = None
    #: the stage the method's calls are accounted under (manifest ``by_stage``, ``calls.jsonl``)
    stage: str = "predictions"

    def calls(self, calls: Sequence[Call], description: str | None = None) -> RunResult:
        """One batch through the run (``Run.calls`` under this context's stage)."""
        if self.run is None:
            raise CarebenchError("this method calls a model: it needs the command's run")
        return self.run.calls(calls, description or self.stage, stage=self.stage)

    def model(self, role: str = "default"):
        m = self.models.get(role) or self.models.get("default")
        if m is None:
            who = f"method {self.method!r}" if self.method else "this method"
            raise CarebenchError(f"{who} needs a model: pass --model SPEC (role {role!r})")
        return m


class RiskMethod(Protocol):
    name: str
    needs_model: bool

    def calls(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[Call]:
        """The model calls predicting would make (for --dry-run); [] for fitted methods."""
        ...

    def predict(self, items: Sequence[RiskItem], ctx: MethodContext) -> list[RiskPrediction]: ...


MethodFactory = Callable[..., RiskMethod]
REGISTRY: dict[str, MethodFactory] = {}


def register(name: str) -> Callable[[MethodFactory], MethodFactory]:
    def deco(factory: MethodFactory) -> MethodFactory:
        REGISTRY[name] = factory
        return factory

    return deco


def make_method(name: str, **options: Any) -> RiskMethod:
    if name not in REGISTRY:
        raise CarebenchError(f"unknown risk method {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](**options)
