"""Few-shot k sweep (seeds/001 Appendix G, Figure 4).

One exemplar pool (the ``pool_per_level`` shortest posts of each level, 16 -> 64) is
held out once; every arm -- k in {2, 4, 8, 16, 32, 64} and the k=0 zero-shot
reference -- is scored on the *same* items outside the pool, so the arms differ only
in k. The k=0 request is exactly ``llm``'s, so it shares ``llm``'s cached answers.
All arms' calls are made as one batch (one progress bar, full concurrency).

Failed predictions are scored as in the experiment: by default as the level farthest
from the gold one (``failures="worst"``), or excluded (``"drop"``); each row states
its failure count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from carebench.risk.methods.base import MethodContext, Prediction, RiskItem
from carebench.risk.methods.llm import POOL_PER_LEVEL, FewShotMethod, run_calls
from carebench.risk.scale import K, farthest_level
from carebench.types import CarebenchError

#: Appendix G: k in {2, 4, 8, 16, 32, 64}, plus the k=0 reference
SWEEP_KS: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
SWEEP_METRICS: tuple[str, ...] = ("accuracy", "macro_f1", "qwk", "mae")
FAILURE_POLICIES = ("worst", "drop")


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]  # one per k (k=0 first): k, n, failures, metric values [+ ci]
    pool_ids: list[str]
    scored_ids: list[str]
    predictions: dict[int, list[Prediction]] = field(default_factory=dict)
    png: bytes | None = None  # Figure 4: macro-F1 and QWK against k, dotted k=0 lines


def scored_levels(
    preds: Sequence[Prediction], gold: dict[str, int], failures: str
) -> tuple[np.ndarray, np.ndarray, int]:
    """(y_true, y_pred, n_failed) under the failure policy."""
    if failures not in FAILURE_POLICIES:
        raise CarebenchError(f"failures must be one of {FAILURE_POLICIES}, got {failures!r}")
    y_true, y_pred, n_failed = [], [], 0
    for p in preds:
        g = gold[p.item_id]
        if p.level is None:
            n_failed += 1
            if failures == "drop":
                continue
            y_true.append(g)
            y_pred.append(farthest_level(g))
        else:
            y_true.append(g)
            y_pred.append(p.level)
    return np.asarray(y_true, int), np.asarray(y_pred, int), n_failed


def fewshot_sweep(
    items: Sequence[RiskItem],
    ctx: MethodContext,
    ks: Sequence[int] = SWEEP_KS,
    pool_per_level: int = POOL_PER_LEVEL,
    failures: str = "worst",
    metrics: Sequence[str] = SWEEP_METRICS,
    bootstrap: int = 0,
    figure: bool = True,
    role: str = "default",
) -> SweepResult:
    """Run every k (and k=0) on the items outside one held-out pool; rows + Figure 4."""
    from carebench.stats.bootstrap import bootstrap_metrics
    from carebench.stats.metrics import compute_metrics

    items = list(items)
    ks = sorted({int(k) for k in ks} | {0})
    if ks[0] < 0:
        raise CarebenchError(f"few-shot k must be >= 0, got {ks[0]}")
    arms = {
        k: FewShotMethod(k=k, pool_per_level=pool_per_level, role=role, name=f"llm-few-shot-k{k}")
        for k in ks
    }
    pool = arms[0].pool(items, ctx)
    if ks[-1] > len(pool):
        raise CarebenchError(
            f"k={ks[-1]} needs {ks[-1]} exemplars but the pool holds {len(pool)} "
            f"({pool_per_level} per level at most); lower k or raise pool_per_level"
        )
    scored = arms[0].scored(items, ctx)
    if not scored:
        raise CarebenchError("every item is in the exemplar pool: nothing left to score")
    plan = {k: m.calls(items, ctx) for k, m in arms.items()}
    flat = [c for k in ks for c in plan[k]]
    comps = run_calls(ctx, flat)
    gold = {it.id: it.level for it in scored}
    rows, preds_by_k, pos = [], {}, 0
    for k in ks:
        n = len(plan[k])
        preds = arms[k].decode(scored, plan[k], comps[pos : pos + n], ctx)
        pos += n
        preds_by_k[k] = preds
        y_true, y_pred, n_failed = scored_levels(preds, gold, failures)
        row: dict[str, Any] = {
            "k": k,
            "n": len(scored),
            "scored": len(y_true),
            "failures": n_failed,
        }
        if len(y_true):
            row.update(compute_metrics(y_true, y_pred, K, list(metrics)))
            if bootstrap:
                ci = bootstrap_metrics(y_true, y_pred, K, list(metrics), B=bootstrap, seed=ctx.seed)
                row.update({f"{m}_ci": list(ci[m]["ci"]) for m in metrics})
        rows.append(row)
    result = SweepResult(rows, [it.id for it in pool], [it.id for it in scored], preds_by_k)
    if figure:
        result.png = sweep_figure(rows)
    return result


def sweep_figure(rows: Sequence[dict[str, Any]]) -> bytes | None:
    """Figure 4: macro-F1 and QWK against k (k > 0), the k=0 values as dotted lines."""
    from carebench.report.figures import line_chart

    ref = next((r for r in rows if r["k"] == 0), None)
    arms = [r for r in rows if r["k"] > 0 and "macro_f1" in r and "qwk" in r]
    if not arms:
        return None
    series = {"Macro-F1": [r["macro_f1"] for r in arms], "QWK": [r["qwk"] for r in arms]}
    refs = {"Macro-F1": ref["macro_f1"], "QWK": ref["qwk"]} if ref and "qwk" in ref else None
    return line_chart(
        [str(r["k"]) for r in arms],  # categorical axis: doubling k evenly spaced
        series,
        title=f"Few-shot scaling (n = {arms[0]['n']} items outside the exemplar pool)",
        xlabel="k (exemplars in the prompt)",
        ylabel="score",
        reference_lines=refs,
        reference_label="k=0",
    )


def write_sweep(result: SweepResult, out_dir: Path | str, title: str = "Few-shot k sweep") -> Path:
    """``sweep.json`` (rows, pool and scored ids), ``records.jsonl`` and the report with Figure 4."""
    from carebench.report import Callout, Figure, KeyValue, Report, Section, Table, write_report
    from carebench.rundir import write_json, write_jsonl

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(
        out / "sweep.json",
        {"rows": result.rows, "pool_ids": result.pool_ids, "scored_ids": result.scored_ids},
    )
    records = []
    for k, preds in result.predictions.items():
        for p in preds:
            records.append(
                {
                    "item_id": p.item_id,
                    "method": p.method,
                    "k": k,
                    "pred": p.level,
                    "status": p.status,
                    "probs": p.probs,
                    "raw": p.raw,
                    "cost_usd": p.cost_usd,
                    "latency_s": p.latency_s,
                    "usage": {
                        "prompt_tokens": p.usage.prompt_tokens,
                        "completion_tokens": p.usage.completion_tokens,
                    },
                }
            )
    write_jsonl(out / "records.jsonl", records)
    metric_cols = [c for c in SWEEP_METRICS if result.rows and c in result.rows[0]]
    table = Table(
        ["k", "n", "failures", *metric_cols],
        [[r["k"], r["n"], r["failures"], *[r.get(c) for c in metric_cols]] for r in result.rows],
        caption="Every arm scored on the same items outside the exemplar pool.",
        number_format=["d", "d", "d", *[".3f"] * len(metric_cols)],
    )
    blocks: list[Any] = [
        KeyValue(
            [("exemplar pool", len(result.pool_ids)), ("items scored", len(result.scored_ids))]
        ),
        table,
    ]
    if result.png:
        blocks.append(
            Figure(
                "fewshot_sweep",
                result.png,
                "Macro-F1 and QWK against k; dotted lines: the k=0 reference.",
            )
        )
    blocks.append(Callout("Pool items are exemplars only and are never scored.", "info"))
    write_report(Report(title, sections=[Section("Few-shot scaling", blocks)]), out)
    return out


def sweep_json(result: SweepResult) -> str:
    return json.dumps({"rows": result.rows, "pool_ids": result.pool_ids}, indent=2)
