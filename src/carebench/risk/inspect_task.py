"""``inspect eval carebench/risk``: the risk suite's prompted methods as an Inspect task.

One sample per scored item, its input the method's own messages (the prompt a carebench
run sends, few-shot exemplars included); the solver generates with the method's decoding
settings; the scorer reads the answer with the method's own parser and status rules
(``decode``: a parse failure, an empty, cut or filtered answer is a failure, never a
guess) and keeps the prediction's ``records.jsonl`` line in the score's metadata; the
metric is :func:`carebench.risk.scoring.score_records` over those lines, in item order,
with the run's bootstrap seed, so the seven ordinal-aware metrics and their intervals are
the numbers ``carebench risk run`` gives for the same answers.

Only the one-call letter methods fit a sample (``llm``, ``llm-conservative``,
``llm-contextual``, ``llm-cot``, ``llm-few-shot``); fitted, moderation and ensemble
methods are refused with one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import CORRECT, INCORRECT, SampleScore, Score, Target, metric, scorer
from inspect_ai.solver import Generate, TaskState, solver

from carebench.engine.runner import Call
from carebench.inspect.bridge import chat_messages, completion_of, generate_options
from carebench.inspect.errors import task_errors
from carebench.inspect.names import task_name
from carebench.inspect.notice import announce
from carebench.inspect.offline import mockllm_offline
from carebench.risk.config import prediction_record
from carebench.risk.data import load_dataset
from carebench.risk.methods import MethodContext, make_method
from carebench.risk.methods.llm import LetterMethod
from carebench.risk.scale import LETTERS
from carebench.risk.scoring import DEFAULT_MAX_FAILURE_SHARE, METRIC_KEYS, score_records
from carebench.types import CarebenchError


@dataclass(frozen=True)
class InspectModel:
    """Stands in for carebench's model in a method's context: the method only names it."""

    spec: str
    role: str = "default"
    extra: dict[str, Any] = field(default_factory=dict)


def letter_method(method: str, options: dict[str, Any] | None) -> LetterMethod:
    m = make_method(method, **dict(options or {}))
    if not isinstance(m, LetterMethod):
        raise CarebenchError(f"risk method {method!r} is not a one-call prompted method; under Inspect: "
                             "llm, llm-conservative, llm-contextual, llm-cot, llm-few-shot")
    if m.decoding != "plain":
        raise CarebenchError(f"decoding={m.decoding} is not available under Inspect (plain only)")
    return m


def risk_metrics_of(records: list[dict[str, Any]], *, failures: str, bootstrap: int, seed: int,
                    max_failure_share: float) -> dict[str, float]:
    """carebench's metrics of one method's records, flattened for Inspect (``NAME``, ``NAME_ci_low``,
    ``NAME_ci_high``, and the counts); None values (an empty interval) are left out."""
    scored = score_records(records, failures=failures, B=bootstrap, seed=seed,
                           max_failure_share=max_failure_share)
    entry = next(iter(scored["methods"].values()))
    out: dict[str, float] = {}
    for name in METRIC_KEYS:
        value, (lo, hi) = entry[name]["value"], entry[name]["ci"]
        for key, v in ((name, value), (f"{name}_ci_low", lo), (f"{name}_ci_high", hi)):
            if v is not None:
                out[key] = float(v)
    out["n_scored"] = float(entry["n_scored"])
    out["failures"] = float(entry["failures"])
    return out


def _records(scores: list[SampleScore]) -> list[dict[str, Any]]:
    rows = [(s.score.metadata or {}) for s in scores]
    rows = [r for r in rows if "record" in r]
    return [r["record"] for r in sorted(rows, key=lambda r: r["order"])]


@metric(name="carebench_risk")
def risk_metrics(failures: str = "wrong", bootstrap: int = 2000, seed: int = 42,
                 max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE):
    """The seven ordinal-aware metrics with their bootstrap intervals (carebench's scoring)."""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        records = _records(scores)
        if not records:
            return {}
        return risk_metrics_of(records, failures=failures, bootstrap=bootstrap, seed=seed,
                               max_failure_share=max_failure_share)

    return compute


def _solver(settings: dict[str, dict[str, Any]]):
    @solver(name="carebench/method_settings")
    def method_settings():
        """Generate with the decoding settings the method's request for this item has."""

        async def solve(state: TaskState, generate: Generate) -> TaskState:
            return await generate(state, **settings[str(state.sample_id)])

        return solve

    return method_settings()


def _scorer(method: LetterMethod, ctx: MethodContext, calls: dict[str, Call]):
    @scorer(metrics=[], name="carebench/risk_letter")
    def risk_letter():
        """The method's parser and status rules on the answer; the record line in metadata."""

        async def score(state: TaskState, target: Target) -> Score:
            call = calls[str(state.sample_id)]
            item = call.tag[1]
            comp = completion_of(state.output, model=str(state.model))
            pred = method.decode([item], [call], [comp], ctx)[0]
            record = prediction_record(pred, item, method.name, str(state.model))
            ok = record["status"] == "ok"
            letter = LETTERS[record["pred"]] if ok else None
            explanation = (f"read level {letter}" if ok else
                           f"{record['status']}: {(record['detail'] or {}).get('error', '')}".strip())
            return Score(value=CORRECT if ok and record["pred"] == item.level else INCORRECT,
                         answer=letter, explanation=explanation,
                         metadata={"order": (state.metadata or {}).get("order", 0), "record": record})

        return score

    return risk_letter()


@task(name=task_name("risk"))
@task_errors("risk")
def risk(data: str = "builtin:sample", method: str = "llm", format: str | None = None,
         columns: str | None = None, options: dict[str, Any] | None = None, seed: int = 42,
         bootstrap: int = 2000, failures: str = "wrong",
         max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE) -> Task:
    """Graded risk measurement (Beyond the Flag): one prompted method on one corpus."""
    notice = announce("carebench/risk")
    mockllm_offline()
    corpus = load_dataset(data, format, columns)
    m = letter_method(method, options)
    ctx = MethodContext(run=None, models={"default": InspectModel("inspect")}, seed=int(seed),
                        method=m.name)
    made = m.calls(corpus.items, ctx)
    by_id = {it.id: it for it in corpus.items}
    order = {it.id: i for i, it in enumerate(corpus.items)}
    calls: dict[str, Call] = {}
    samples = []
    for c in made:
        it = by_id[c.tag[1]]
        calls[it.id] = Call(c.model, c.request, (m.name, it))
        samples.append(Sample(input=chat_messages(c.request.messages), target=LETTERS[it.level], id=it.id,
                              metadata={"level": it.level, "group": it.group, "order": order[it.id]}))
    settings = {sid: generate_options(c.request) for sid, c in calls.items()}
    return Task(
        dataset=MemoryDataset(samples, name=corpus.name),
        solver=_solver(settings),
        scorer=_scorer(m, ctx, calls),
        metrics=[risk_metrics(failures=failures, bootstrap=int(bootstrap), seed=int(seed),
                              max_failure_share=float(max_failure_share))],
        metadata={"carebench": {"suite": "risk", "method": m.name, "dataset": corpus.describe(),
                                "seeds": {"bootstrap_seed": int(seed)}, "bootstrap": int(bootstrap),
                                "failures": failures, **notice}},
    )
