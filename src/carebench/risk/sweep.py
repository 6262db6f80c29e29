"""Few-shot k sweep (Beyond the Flag, Appendix G, Figure 4).

One exemplar pool (the ``pool_per_level`` shortest posts of each level, 16 -> 64) is
held out once; every arm -- k in {2, 4, 8, 16, 32, 64} and the k=0 zero-shot
reference -- is scored on the *same* items outside the pool, so the arms differ only
in k. The k=0 request is exactly ``llm``'s, so it shares ``llm``'s cached answers.
All arms' calls are made as one batch (one progress bar, full concurrency).

The sweep is an ordinary risk run (:class:`SweepSuite` in the run skeleton): its
records are risk records with one method per arm, it writes ``calls.jsonl`` (so
``replay:DIR`` answers from it), shares the run's budget, and ``carebench report
DIR`` rebuilds the sweep table and Figure 4 from the records (manifest key
``sweep``). Failed predictions count as wrong at the level farthest from gold
(``failures="wrong"``) or are excluded (``"drop"``), and every value has its
bootstrap interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from carebench.experiment import Execution, Plan, rerender, run_suite, stage
from carebench.risk.experiment import RiskSuite, prediction_record
from carebench.risk.methods.base import MethodContext, Prediction, RiskItem
from carebench.risk.methods.llm import POOL_PER_LEVEL, FewShotMethod, run_calls
from carebench.risk.report import SWEEP_METRICS, arm_name, sweep_figure, sweep_rows
from carebench.run import Run
from carebench.run_options import (
    DEFAULT_TIMEOUT_S,
    Batch,
    BatchFormat,
    Budget,
    Cache,
    Concurrency,
    DryRun,
    Json,
    ModelOption,
    NoCache,
    Out,
    Timeout,
    run_options,
)
from carebench.types import CarebenchError

#: Appendix G: k in {2, 4, 8, 16, 32, 64}, plus the k=0 reference
SWEEP_KS: tuple[int, ...] = (2, 4, 8, 16, 32, 64)

@dataclass
class SweepResult:
    rows: list[dict[str, Any]]  # one per k (k=0 first): k, n, failures, metric values + _ci
    pool_ids: list[str]
    scored_ids: list[str]
    predictions: dict[int, list[Prediction]] = field(default_factory=dict)
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
    rows = sweep_rows(metrics, ks, failures)
    result = SweepResult(
        rows, [it.id for it in pool], [it.id for it in scored], preds_by_k, records, metrics
    )
    if figure:
        result.png = sweep_figure(rows)
    return result


class SweepSuite:
    """The sweep as a run of the skeleton; scores and renders like any risk run."""

    name = "risk"

    def __init__(self, data: str, model: str, *, format: str | None = None,
                 ks: Sequence[int] = SWEEP_KS, pool_per_level: int = POOL_PER_LEVEL,
                 train: str | None = None, train_format: str | None = None, seed: int = 42,
                 bootstrap: int = 2000, failures: str = "wrong"):
        self.data, self.model, self.format = data, model, format
        self.ks = sorted({int(k) for k in ks} | {0})
        self.pool_per_level, self.train, self.train_format = pool_per_level, train, train_format
        self.seed, self.bootstrap, self.failures = seed, bootstrap, failures

    def _prepare(self, run: Run):
        from carebench.risk.data import load_dataset

        data = load_dataset(self.data, self.format)
        train = load_dataset(self.train, self.train_format) if self.train else None
        ctx = MethodContext(run=run, models={"default": run.model(self.model)},
                            seed=self.seed, train=None if train is None else train.items,
                            get_model=run.model, stage="few-shot sweep")
        return data, ctx

    def plan(self, run: Run) -> Plan:
        data, ctx = self._prepare(run)
        return Plan(self.name, [stage(run, arm_name(k), FewShotMethod(
            k=k, pool_per_level=self.pool_per_level).calls(data.items, ctx)) for k in self.ks])

    def execute(self, run: Run) -> Execution:
        data, ctx = self._prepare(run)
        res = fewshot_sweep(data.items, ctx, self.ks, self.pool_per_level, self.failures,
                            self.bootstrap, figure=False)
        records = res.records
        cut = sorted({r["method"] for r in records if r["status"] == "budget"},
                     key=lambda m: int(m.split("=")[1]))
        for arm in cut:
            run.mark_incomplete(arm)
        records = [r for r in records if r["status"] != "budget"]
        config = {"data": self.data, "format": self.format, "model": self.model, "ks": self.ks,
                  "pool_per_level": self.pool_per_level, "train": self.train,
                  "failures": self.failures, "bootstrap": self.bootstrap, "seed": self.seed}
        return Execution(records=records, config=config, dataset=data.describe(),
                         seeds={"seed": self.seed},
                         extra={"sweep": {"ks": self.ks, "pool_size": len(res.pool_ids)}})

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
        return RiskSuite().read_records(run_dir, manifest)

    def score(self, records: list[dict[str, Any]], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return RiskSuite().score(records, manifest)

    def render(self, metrics, records, manifest):
        return RiskSuite().render(metrics, records, manifest)


def write_sweep(
    result: SweepResult,
    out_dir: Path | str,
    *,
    config: dict[str, Any] | None = None,
    dataset: dict[str, Any] | None = None,
    models: Sequence[str] = (),
) -> Path:
    """A risk run directory from a sweep computed in memory (records, manifest, report)."""
    from carebench.rundir import write_jsonl, write_manifest

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "records.jsonl", result.records)
    st = result.metrics.get("settings", {})
    write_manifest(
        out, suite="risk",
        config={**(config or {}), "failures": st.get("failures"), "bootstrap": st.get("bootstrap"),
                "seed": st.get("seed")},
        models=list(models), seeds={"seed": int(st.get("seed", 42))},
        dataset=dataset or {"name": "?", "source": "?"},
        extra={"sweep": {"ks": [r["k"] for r in result.rows], "pool_size": len(result.pool_ids)}},
    )
    rerender(out, RiskSuite())
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
    out: Out = None, cache: Cache = None, no_cache: NoCache = False, budget: Budget = None,
    dry_run: DryRun = False, json_out: Json = False, concurrency: Concurrency = None, model_option: ModelOption = None,
    timeout: Timeout = DEFAULT_TIMEOUT_S, batch: Batch = None, batch_format: BatchFormat = None,
) -> None:
    """Few-shot k sweep (Figure 4): every k scored on the same items outside the pool."""
    from carebench.experiment import echo_plan
    from carebench.rundir import read_json, write_json

    suite = SweepSuite(data, model, format=format, ks=list(k) if k else SWEEP_KS,
                       pool_per_level=pool_per_level, train=train, train_format=train_format,
                       seed=seed, bootstrap=bootstrap, failures=failures)
    options = run_options(out=out, cache=cache, no_cache=no_cache, budget=budget, dry_run=dry_run,
                          concurrency=concurrency, model_option=model_option, timeout=timeout,
                        batch=batch, batch_format=batch_format)
    result = run_suite(suite, options)
    if isinstance(result, Plan):
        echo_plan(result)
        return
    run_dir = result
    metrics = read_json(run_dir / "metrics.json")
    rows = sweep_rows(metrics, suite.ks, failures)
    write_json(run_dir / "sweep.json", {"rows": rows, "pool_size": read_json(
        run_dir / "manifest.json")["sweep"]["pool_size"], "scored": metrics["n"]})
    typer.echo(f"{'k':>3} {'n':>5} {'fail':>5} {'Acc':>6} {'F1-Mac':>6} {'QWK':>6} {'MAE':>6}")
    for r in rows:
        vals = " ".join(f"{r[m]:6.3f}" if r[m] is not None else f"{'-':>6}" for m in SWEEP_METRICS)
        typer.echo(f"{r['k']:>3} {r['n']:>5} {r['failures']:>5} {vals}")
    typer.echo(
        f"wrote {run_dir}/report.md, report.html, sweep.json, figures/fig4_fewshot_sweep.png"
    )
