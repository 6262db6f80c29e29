"""Few-shot k sweep (Beyond the Flag, Appendix G, Figure 4).

One exemplar pool (the ``pool_per_level`` shortest posts of each level, 16 -> 64) is
held out once; every arm -- k in {2, 4, 8, 16, 32, 64} and the k=0 zero-shot
reference -- is scored on the *same* items outside the pool, so the arms differ only
in k. The k=0 request is exactly ``llm``'s, so it shares ``llm``'s cached answers.
All arms' calls are made as one batch (one progress bar, full concurrency).

The sweep is an ordinary risk run (:class:`carebench.risk.suite.SweepSuite` in the run skeleton): its
records are risk records with one method per arm, it writes ``calls.jsonl`` (so
``replay:DIR`` answers from it), shares the run's budget, and ``carebench report
DIR`` rebuilds the sweep table and Figure 4 from the records (manifest key
``sweep``). Failed predictions count as wrong at the level farthest from gold
(``failures="wrong"``) or are excluded (``"drop"``), and every value has its
bootstrap interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from carebench.risk.config import prediction_record
from carebench.risk.methods.base import MethodContext, RiskItem, RiskPrediction
from carebench.risk.methods.llm import POOL_PER_LEVEL, FewShotMethod, run_calls
from carebench.risk.report import arm_name, sweep_figure, sweep_rows
from carebench.types import CarebenchError

#: Appendix G: k in {2, 4, 8, 16, 32, 64}, plus the k=0 reference
SWEEP_KS: tuple[int, ...] = (2, 4, 8, 16, 32, 64)

@dataclass
class SweepResult:
    rows: list[dict[str, Any]]  # one per k (k=0 first): k, n, failures, metric values + _ci
    pool_ids: list[str]
    scored_ids: list[str]
    predictions: dict[int, list[RiskPrediction]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)  # experiment record format
    metrics: dict[str, Any] = field(default_factory=dict)  # metrics.json shape, arm = method
    png: bytes | None = None  # Figure 4: macro-F1 and QWK against k, dotted k=0 lines


def fewshot_sweep(
    items: Sequence[RiskItem],
    ctx: MethodContext,
    ks: Sequence[int] = SWEEP_KS,
    pool_per_level: int = POOL_PER_LEVEL,
    failures: str = "wrong",
    bootstrap: int = 2000,
    figure: bool = True,
    role: str = "default",
) -> SweepResult:
    """Run every k (and k=0) on the items outside one held-out pool; rows + Figure 4."""
    from carebench.risk.scoring import score_records

    items = list(items)
    ks = sorted({int(k) for k in ks} | {0})
    if ks[0] < 0:
        raise CarebenchError(f"few-shot k must be >= 0, got {ks[0]}")
    arms = {
        k: FewShotMethod(k=k, pool_per_level=pool_per_level, role=role, name=arm_name(k))
        for k in ks
    }
    pool = arms[0].pool(items, ctx)
    if ks[-1] > len(pool):
        raise CarebenchError(
            f"k={ks[-1]} needs {ks[-1]} exemplars but the pool holds {len(pool)} "
            f"({pool_per_level} per level at most); lower k or raise --pool-per-level"
        )
    scored = arms[0].scored(items, ctx)
    if not scored:
        raise CarebenchError("every item is in the exemplar pool: nothing left to score")
    plan = {k: m.calls(items, ctx) for k, m in arms.items()}
    comps = run_calls(ctx, [c for k in ks for c in plan[k]])
    model = str(ctx.model(role).spec)
    preds_by_k: dict[int, list[RiskPrediction]] = {}
    records: list[dict[str, Any]] = []
    pos = 0
    for k in ks:
        n = len(plan[k])
        preds = arms[k].decode(scored, plan[k], comps[pos : pos + n], ctx)
        pos += n
        preds_by_k[k] = preds
        # scored items only: the pool is not part of the evaluation set at all
        records += [
            prediction_record(p, it, arm_name(k), model)
            for p, it in zip(preds, scored, strict=True)
        ]
    metrics = score_records(records, failures=failures, B=bootstrap, seed=ctx.seed)
    rows = sweep_rows(metrics, ks, failures)
    result = SweepResult(
        rows, [it.id for it in pool], [it.id for it in scored], preds_by_k, records, metrics
    )
    if figure:
        result.png = sweep_figure(rows)
    return result
