"""``carebench risk``: run risk methods on a corpus (``run``) and the few-shot k sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carebench.types import CarebenchError

app = typer.Typer(
    help="Graded suicide-risk measurement (Beyond the Flag): methods, metrics, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def run(
    data: Annotated[str | None, typer.Option(help="PATH to JSONL/CSV/Parquet, or builtin:NAME.")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", help="jsonl, csv, parquet, gaur or clinician-sentences (default: detect).")] = None,
    method: Annotated[list[str] | None, typer.Option(
        "--method", help="Method NAME or NAME:key=value,...; repeat for several (e.g. tfidf-lr, "
             "moderation-fixed, llm:variant=conservative, embed-lr:encoder=/local/hf-model).")] = None,
    model: Annotated[str | None, typer.Option(help="Chat model spec for model-backed methods.")] = None,
    moderation_model: Annotated[str | None, typer.Option(
        help="Moderation model spec (e.g. openai-moderation:omni-moderation-latest).")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for folds and bootstraps [default: 42].")] = None,
    bootstrap: Annotated[int | None, typer.Option(help="Bootstrap resamples [default: 2000].")] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/risk-<time>).")] = None,
    train: Annotated[str | None, typer.Option(
        help="Fit supervised/calibrated methods on this corpus instead of cross-validating.")] = None,
    train_format: Annotated[str | None, typer.Option(help="Format of --train.")] = None,
    failures: Annotated[str | None, typer.Option(
        help="Failed predictions: 'wrong' (scored as farthest level) or 'drop' [default: wrong].")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML/TOML config file (see docs).")] = None,
    dry_run: Annotated[bool, typer.Option(help="Plan the model calls and cost; call nothing.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the cache.")] = False,
    cache: Annotated[Path | None, typer.Option(help="Cache file (default: user cache dir).")] = None,
    budget: Annotated[float | None, typer.Option(help="Stop starting new calls beyond this USD spend.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Concurrent calls per model.")] = None,
) -> None:
    """Run methods on a labelled corpus and write metrics, records and the report."""
    from carebench.risk.config import config_from_file, method_specs
    from carebench.risk.experiment import RunConfig, run_experiment

    if config is not None:
        overrides = {
            "data": data, "format": format, "model": model, "moderation_model": moderation_model,
            "seed": seed, "bootstrap": bootstrap, "out": str(out) if out else None,
            "train": train, "train_format": train_format, "failures": failures,
            "cache": str(cache) if cache else None, "budget": budget, "concurrency": concurrency,
            "methods": list(method) if method else None,
        }
        cfg = config_from_file(config, overrides)
        if no_cache:
            cfg.use_cache = False
    else:
        if not data:
            raise CarebenchError("pass --data PATH|builtin:NAME (or --config FILE)")
        if not method:
            raise CarebenchError("pass at least one --method (e.g. --method tfidf-lr)")
        cfg = RunConfig(
            data=data, methods=method_specs(list(method), None, "--method"), format=format,
            model=model, moderation_model=moderation_model,
            seed=42 if seed is None else seed, bootstrap=2000 if bootstrap is None else bootstrap,
            out=out, train=train, train_format=train_format, failures=failures or "wrong",
            use_cache=not no_cache, cache_path=cache, budget=budget, concurrency=concurrency,
        )
    cfg.dry_run = dry_run
    outcome = run_experiment(cfg)
    if outcome.plan is not None:
        from carebench.experiment import echo_plan

        echo_plan(outcome.plan)
        return
    _summary(outcome.metrics or {})
    typer.echo(f"wrote {outcome.run_dir}/report.md, report.html, metrics.json, records.jsonl")


def _summary(metrics: dict) -> None:
    keys = ("accuracy", "macro_f1", "weighted_f1", "qwk", "mae", "adjacent_accuracy", "high_risk_f1")
    heads = ("Acc", "F1-Mac", "F1-Wt", "QWK", "MAE", "AdjAcc", "HR-F1")
    counts = ", ".join(f"{k} {v}" for k, v in metrics.get("label_counts", {}).items())
    typer.echo(f"{metrics.get('n')} items ({counts})")
    width = max([len("chance")] + [len(n) for n in metrics.get("methods", {})])
    typer.echo(f"{'method':<{width}}  " + "  ".join(f"{h:>6}" for h in heads) + "  failures")
    ch = metrics.get("chance", {})
    typer.echo(f"{'chance':<{width}}  " + "  ".join(f"{ch.get(k, float('nan')):6.3f}" for k in keys))
    for name, e in metrics.get("methods", {}).items():
        vals = [e[k]["value"] for k in keys]
        tail = f"  {e['failures']:>8}" if "failures" in e else "  incomplete"
        typer.echo(f"{name:<{width}}  " + "  ".join(
            f"{v:6.3f}" if v is not None else f"{'-':>6}" for v in vals) + tail)


def _mount_sweep() -> None:
    """``carebench risk sweep``: the few-shot k sweep (Figure 4)."""
    from carebench.risk.sweep import sweep_command

    app.command("sweep")(sweep_command)


_mount_sweep()
