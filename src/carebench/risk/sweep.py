"""Few-shot k sweep (Beyond the Flag, Appendix G, Figure 4).

One exemplar pool (the ``pool_per_level`` shortest posts of each level, 16 -> 64) is
held out once; every arm -- k in {2, 4, 8, 16, 32, 64} and the k=0 zero-shot
reference -- is scored on the *same* items outside the pool, so the arms differ only
in k. The k=0 request is exactly ``llm``'s, so it shares ``llm``'s cached answers.
All arms' calls are made as one batch (one progress bar, full concurrency).

Scoring goes through the run's own machinery (``risk.scoring.score_records``): failed
predictions count as wrong at the level farthest from gold (``failures="wrong"``) or
are excluded (``"drop"``), each arm states its failure count, and every value has its
bootstrap interval. ``write_sweep`` writes a normal risk run directory (records,
metrics, manifest, the full report) with the sweep table and Figure 4 on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from carebench.risk.methods.base import MethodContext, Prediction, RiskItem
from carebench.risk.methods.llm import POOL_PER_LEVEL, FewShotMethod, run_calls
from carebench.types import CarebenchError

#: Appendix G: k in {2, 4, 8, 16, 32, 64}, plus the k=0 reference
SWEEP_KS: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
#: columns of the sweep table (Appendix G discusses these four)
SWEEP_METRICS: tuple[str, ...] = ("accuracy", "macro_f1", "qwk", "mae")


@dataclass
class SweepResult:
    rows: list[dict[str, Any]]  # one per k (k=0 first): k, n, failures, metric values + _ci
    pool_ids: list[str]
    scored_ids: list[str]
    predictions: dict[int, list[Prediction]] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)  # experiment record format
    metrics: dict[str, Any] = field(default_factory=dict)  # metrics.json shape, arm = method
    png: bytes | None = None  # Figure 4: macro-F1 and QWK against k, dotted k=0 lines


def arm_name(k: int) -> str:
    return f"few-shot k={k}"


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
    from carebench.risk.experiment import prediction_record
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
    preds_by_k: dict[int, list[Prediction]] = {}
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
    rows = []
    for k in ks:
        m = metrics["methods"][arm_name(k)]
        row: dict[str, Any] = {
            "k": k,
            "n": m["n_scored"] + (m["failures"] if failures == "drop" else 0),
            "scored": m["n_scored"],
            "failures": m["failures"],
        }
        for name in SWEEP_METRICS:
            row[name] = m[name]["value"]
            row[f"{name}_ci"] = m[name]["ci"]
        rows.append(row)
    result = SweepResult(
        rows, [it.id for it in pool], [it.id for it in scored], preds_by_k, records, metrics
    )
    if figure:
        result.png = sweep_figure(rows)
    return result


def sweep_figure(rows: Sequence[dict[str, Any]]) -> bytes | None:
    """Figure 4: macro-F1 and QWK against k (k > 0), the k=0 values as dotted lines."""
    from carebench.report.figures import line_chart

    ref = next((r for r in rows if r["k"] == 0), None)
    arms = [
        r for r in rows if r["k"] > 0 and r.get("macro_f1") is not None and r.get("qwk") is not None
    ]
    if not arms:
        return None
    series = {"Macro-F1": [r["macro_f1"] for r in arms], "QWK": [r["qwk"] for r in arms]}
    refs = None
    if ref is not None and ref.get("macro_f1") is not None and ref.get("qwk") is not None:
        refs = {"Macro-F1": ref["macro_f1"], "QWK": ref["qwk"]}
    return line_chart(
        [str(r["k"]) for r in arms],  # categorical axis: doubling k evenly spaced
        series,
        title=f"Few-shot scaling (n = {arms[0]['n']} items outside the exemplar pool)",
        xlabel="k (exemplars in the prompt)",
        ylabel="score",
        reference_lines=refs,
        reference_label="k=0",
    )


def sweep_section(result: SweepResult):
    """The report section: the sweep table and Figure 4."""
    from carebench.report import Callout, Figure, Interval, KeyValue, Section, Table

    def cell(row: dict[str, Any], name: str) -> Any:
        v, ci = row.get(name), row.get(f"{name}_ci") or (None, None)
        return None if v is None else Interval(v, ci[0], ci[1])

    table = Table(
        ["k", "Items", "Failures", "Acc", "F1-Mac", "QWK", "MAE"],
        [
            [r["k"], r["n"], r["failures"], *[cell(r, m) for m in SWEEP_METRICS]]
            for r in result.rows
        ],
        caption="Every arm is scored on the same items outside the exemplar pool (k=0: zero-shot).",
        highlight_max_cols=["Acc", "F1-Mac", "QWK"],
        highlight_min_cols=["MAE"],
    )
    blocks: list[Any] = [
        KeyValue(
            [
                ("exemplar pool (held out, never scored)", len(result.pool_ids)),
                ("items scored by every arm", len(result.scored_ids)),
            ]
        ),
        table,
    ]
    if result.png:
        blocks.append(
            Figure(
                "fig4_fewshot_sweep",
                result.png,
                "Figure 4: macro-F1 and QWK against k; dotted lines: the k=0 reference.",
            )
        )
    blocks.append(
        Callout(
            "Exemplars are the shortest posts of each level, class-interleaved "
            "(a, b, c, d, a, ...); the k-shot set is nested in the 2k-shot set.",
            "info",
        )
    )
    return Section("Few-shot scaling (Appendix G)", blocks, anchor="fewshot-sweep")


def write_sweep(
    result: SweepResult,
    out_dir: Path | str,
    *,
    config: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
    models: Sequence[str] = (),
) -> Path:
    """A risk run directory: records, metrics, manifest, sweep.json and the report."""
    from carebench.report import write_report
    from carebench.risk.report import build_report
    from carebench.rundir import write_json, write_jsonl, write_manifest

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(
        out / "sweep.json",
        {"rows": result.rows, "pool_ids": result.pool_ids, "scored_ids": result.scored_ids},
    )
    write_jsonl(out / "records.jsonl", result.records)
    write_json(out / "metrics.json", result.metrics)
    st = result.metrics.get("settings", {})
    manifest = write_manifest(
        out,
        suite="risk",
        config={
            **(config or {}),
            "failures": st.get("failures"),
            "bootstrap": st.get("bootstrap"),
            "seed": st.get("seed"),
        },
        models=list(models),
        seeds={"seed": int(st.get("seed", 42))},
        dataset=dataset or {"name": "?", "source": "?"},
        extra={"sweep": {"ks": [r["k"] for r in result.rows], "pool_size": len(result.pool_ids)}},
    )
    report = build_report(result.metrics, result.records, manifest)
    report.title = "carebench risk: few-shot k sweep"
    report.sections.insert(0, sweep_section(result))
    write_report(report, out)
    return out


def sweep_command(
    data: Annotated[str, typer.Option(help="PATH to JSONL/CSV/Parquet, or builtin:NAME.")],
    model: Annotated[str, typer.Option(help="Chat model spec (e.g. openai:gpt-4o-mini).")],
    format: Annotated[
        str | None, typer.Option("--format", help="Input format (default: detect).")
    ] = None,
    k: Annotated[
        list[int] | None,
        typer.Option(
            "--k", help="Exemplar counts; repeat (default 2 4 8 16 32 64; k=0 always added)."
        ),
    ] = None,
    pool_per_level: Annotated[
        int, typer.Option(help="Held-out exemplars per level.")
    ] = POOL_PER_LEVEL,
    train: Annotated[
        str | None,
        typer.Option(
            help="Draw exemplars from this corpus instead (then every --data item is scored)."
        ),
    ] = None,
    train_format: Annotated[str | None, typer.Option(help="Format of --train.")] = None,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 42,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 2000,
    failures: Annotated[str, typer.Option(help="'wrong' (farthest level) or 'drop'.")] = "wrong",
    out: Annotated[
        Path | None, typer.Option(help="Run directory (default runs/risk-<time>).")
    ] = None,
    cache: Annotated[
        Path | None, typer.Option(help="Cache file (default: user cache dir).")
    ] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the cache.")
    ] = False,
    budget: Annotated[
        float | None, typer.Option(help="Stop starting new calls beyond this USD.")
    ] = None,
    concurrency: Annotated[int | None, typer.Option(help="Concurrent calls per model.")] = None,
    dry_run: Annotated[bool, typer.Option(help="Plan the calls and cost; call nothing.")] = False,
) -> None:
    """Few-shot k sweep (Figure 4): every k scored on the same items outside the pool."""
    import asyncio

    from carebench.cache import CompletionCache
    from carebench.models import get_model
    from carebench.risk.data import load_dataset
    from carebench.rundir import new_run_dir
    from carebench.runner import Runner, RunnerConfig

    ks = list(k) if k else list(SWEEP_KS)
    data_set = load_dataset(data, format)
    train_set = load_dataset(train, train_format) if train else None
    chat = get_model(model, concurrency=concurrency)
    runner = Runner(
        RunnerConfig(
            concurrency=concurrency,
            budget_usd=budget,
            use_cache=not no_cache,
            description="few-shot sweep calls",
        ),
        cache=None if no_cache else CompletionCache(cache),
    )
    ctx = MethodContext(
        runner=runner,
        models={"default": chat},
        seed=seed,
        train=None if train_set is None else train_set.items,
    )
    try:
        if dry_run:
            calls = [
                c
                for kk in sorted(set(ks) | {0})
                for c in FewShotMethod(k=kk, pool_per_level=pool_per_level).calls(
                    data_set.items, ctx
                )
            ]
            plan = runner.plan(calls)
            typer.echo(
                f"dry run: {plan.total} model calls, {plan.cached} cached, {plan.to_make} to make, "
                f"estimated ${plan.estimated_cost_usd:.4f}"
            )
            return
        res = fewshot_sweep(data_set.items, ctx, ks, pool_per_level, failures, bootstrap)
    finally:
        asyncio.run(chat.aclose())
    run_dir = write_sweep(
        res,
        new_run_dir("risk", out),
        config={
            "data": data,
            "format": format,
            "model": model,
            "ks": ks,
            "pool_per_level": pool_per_level,
            "train": train,
        },
        dataset=data_set.describe(),
        models=[str(chat.spec)],
    )
    typer.echo(f"{'k':>3} {'n':>5} {'fail':>5} {'Acc':>6} {'F1-Mac':>6} {'QWK':>6} {'MAE':>6}")
    for r in res.rows:
        vals = " ".join(f"{r[m]:6.3f}" if r[m] is not None else f"{'-':>6}" for m in SWEEP_METRICS)
        typer.echo(f"{r['k']:>3} {r['n']:>5} {r['failures']:>5} {vals}")
    typer.echo(
        f"wrote {run_dir}/report.md, report.html, sweep.json, figures/fig4_fewshot_sweep.png"
    )
