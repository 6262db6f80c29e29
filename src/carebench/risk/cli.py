"""``carebench risk``: run risk methods on a corpus (``run``) and the few-shot k sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carebench.datasets.builtin import builtin_specs
from carebench.engine.options import RUN_FLAG_VALUES, RUN_FLAGS, RunOptions, run_flags
from carebench.models.base import parse_spec
from carebench.risk.methods.llm import POOL_PER_LEVEL
from carebench.types import CarebenchError

BUILTIN_DATA = ", ".join(builtin_specs("risk"))

app = typer.Typer(
    help="Graded suicide-risk measurement (Beyond the Flag): methods, metrics, report.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
@run_flags()
def run(
    data: Annotated[str | None, typer.Option(show_default="the --config file's; one of them is needed", help=f"PATH to JSONL/CSV/Parquet, or builtin:NAME (built in: {BUILTIN_DATA}).")] = None,
    format: Annotated[str | None, typer.Option(
        "--format", show_default="detect from the file, or the --config file's", help="jsonl, csv, parquet, gaur or clinician-sentences.")] = None,
    columns: Annotated[str | None, typer.Option(
        show_default="the file's own names", help="Your column names: FIELD=COLUMN,... for id, text, level, group and the score "
             "columns, e.g. text=post,level=label (id defaults to the row number).")] = None,
    train_columns: Annotated[str | None, typer.Option(show_default="the file's own names", help="--columns for --train.")] = None,
    prompts: Annotated[Path | None, typer.Option(
        show_default='the package prompts', help="Directory of .txt files replacing package prompts of the same name (e.g. "
             "rubric.txt); the prompt set's hash goes in the manifest and report.")] = None,
    method: Annotated[list[str] | None, typer.Option(
        "--method", show_default="the --config file's; one of them is needed", help="Method NAME or NAME:key=value,...; repeat for several (e.g. tfidf-lr, "
             "moderation-fixed, llm:variant=conservative, embed-lr:encoder=/local/hf-model).")] = None,
    model: Annotated[list[str] | None, typer.Option(
        show_default='none: model-backed methods need one', help="Chat model spec for model-backed methods; repeat to run each method on several "
             "models; vote, adjudicated and stacked then take them as their voter panel "
             "(Beyond the Flag §4.3: three models, one clinical prompt).")] = None,
    moderation_model: Annotated[str | None, typer.Option(
        show_default='none: moderation methods need one', help="Moderation model spec (e.g. openai-moderation:omni-moderation-latest).")] = None,
    seed: Annotated[int | None, typer.Option(show_default="42, or the --config file's", help="Seed for folds and bootstraps.")] = None,
    bootstrap: Annotated[int | None, typer.Option(min=1, show_default="2000, or the --config file's", help="Bootstrap resamples.")] = None,
    limit: Annotated[int | None, typer.Option(
        show_default="every item, or the --config file's", help="Use only the first N items of --data (a quick look, not a sample).")] = None,
    train: Annotated[str | None, typer.Option(
        show_default='none: cross-validate on --data', help="Fit supervised/calibrated methods on this corpus instead of cross-validating.")] = None,
    train_format: Annotated[str | None, typer.Option(show_default='detect from the file', help="Format of --train.")] = None,
    failures: Annotated[str | None, typer.Option(
        show_default="wrong, or the --config file's", help="Failed predictions: 'wrong' (scored as farthest level) or 'drop'.")] = None,
    max_failure_share: Annotated[float | None, typer.Option(
        show_default="0.2, or the --config file's", help="A method failing on more than this share of its items is flagged in the report "
             "and not ranked.")] = None,
    prior: Annotated[list[float] | None, typer.Option(
        "--prior", show_default="0.001, 0.006, 0.03 (docs/risk.md), and only with a negative stratum",
        help="Deployment prevalence of the positive class for precision at an alert budget; repeat for several.")] = None,
    alert_budget: Annotated[list[float] | None, typer.Option(
        "--alert-budget", show_default="0.01, 0.05, 0.10",
        help="Share of traffic that may raise an alert; repeat for several.")] = None,
    positive: Annotated[str | None, typer.Option(
        show_default="behavior (Behavior or Attempt)",
        help="What an alert should find: ideation, behavior or attempt (that level or above), or related (any level vs negative).")] = None,
    net_benefit_pt: Annotated[float | None, typer.Option(
        show_default="none: not reported", help="Threshold probability p_t of the net benefit at each budget.")] = None,
    config: Annotated[Path | None, typer.Option(show_default='none: flags only', help="YAML/TOML config file (see docs).")] = None,
    options: RunOptions = RUN_FLAGS, flags: dict = RUN_FLAG_VALUES,
) -> None:
    """Run methods on a labelled corpus and write metrics, records and the report."""
    from carebench.risk.config import RunConfig
    from carebench.risk.config_file import config_from_file, method_specs
    from carebench.risk.suite import run_experiment

    models = [parse_spec(m) for m in model or []]  # parsed here, once; passed on as ModelSpec
    moderation = parse_spec(moderation_model) if moderation_model else None
    if config is not None:
        overrides = {
            "data": data, "format": format, "moderation_model": moderation, "models": models or None,
            "seed": seed, "bootstrap": bootstrap, "limit": limit,
            "train": train, "train_format": train_format, "failures": failures,
            "max_failure_share": max_failure_share, "columns": columns,
            "train_columns": train_columns, "prompts": str(prompts) if prompts else None,
            "methods": list(method) if method else None,
            "priors": list(prior) if prior else None,
            "alert_budgets": list(alert_budget) if alert_budget else None,
            "positive": positive, "net_benefit_pt": net_benefit_pt,
        }
        cfg = config_from_file(config, overrides, flags)
    else:
        if not data:
            raise CarebenchError("pass --data PATH|builtin:NAME (or --config FILE)")
        if not method:
            raise CarebenchError("pass at least one --method (e.g. --method tfidf-lr)")
        cfg = RunConfig(
            data=data, methods=method_specs(list(method), models if len(models) > 1 else None,
                                            "--method"), format=format,
            model=models[0] if len(models) == 1 else None, moderation_model=moderation,
            seed=42 if seed is None else seed, bootstrap=2000 if bootstrap is None else bootstrap,
            train=train, train_format=train_format, failures=failures or "wrong",
            max_failure_share=0.2 if max_failure_share is None else max_failure_share,
            columns=columns, train_columns=train_columns, limit=limit,
            prompts=str(prompts) if prompts else None, options=options,
            priors=list(prior) if prior else None,
            alert_budgets=list(alert_budget) if alert_budget else None,
            positive=positive or "behavior", net_benefit_pt=net_benefit_pt,
        )
    outcome = run_experiment(cfg)
    if outcome.plan is not None:
        from carebench.engine.skeleton import echo_plan

        echo_plan(outcome.plan)
        return
    _summary(outcome.metrics or {})
    typer.echo(f"wrote {outcome.run_dir}/report.md, report.html, metrics.json, records.jsonl")
    from carebench.engine.skeleton import failed_calls_message

    msg = failed_calls_message(outcome.run_dir) if outcome.run_dir is not None else None
    if msg:
        typer.echo(f"carebench: {msg}", err=True)
        raise typer.Exit(1)


@app.command()
def agreement(
    data: Annotated[str, typer.Option(
        help="Ratings table (.csv/.jsonl/.parquet), one column per rater and one row per item; "
             "or a risk run directory, whose methods (and gold) become the raters.")],
    raters: Annotated[str | None, typer.Option(
        show_default='every column but --id-column', help="Comma-separated rater columns.")] = None,
    id_column: Annotated[str, typer.Option(help="Item id column, not a rater.")] = "id",
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples over items.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 42,
    out: Annotated[Path | None, typer.Option(show_default='none: printed only', help="Also write the numbers to this JSON file.")] = None,
) -> None:
    """Inter-rater agreement (Beyond the Flag, §3.4): pairwise QWK, Krippendorff's alpha
    (ordinal) and Fleiss' kappa, each with a bootstrap interval."""
    from carebench.risk.agreement import agreement as compute
    from carebench.risk.agreement import load_ratings, summary_lines, write_json

    if bootstrap < 1:
        raise CarebenchError("--bootstrap must be at least 1")
    names = [r.strip() for r in raters.split(",") if r.strip()] if raters else None
    res = compute(load_ratings(data, names, id_column), B=bootstrap, seed=seed)
    for line in summary_lines(res):
        typer.echo(line)
    if out is not None:
        write_json(res, out)
        typer.echo(f"wrote {out}")


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
            f"{v:6.3f}" if v is not None else f"{'-':>6}" for v in vals) + tail
            + ("  FLAGGED: too many failures, not ranked" if e.get("flagged") else ""))


@app.command("sweep")
@run_flags()
def sweep(
    data: Annotated[str, typer.Option(help=f"PATH to JSONL/CSV/Parquet, or builtin:NAME (built in: {BUILTIN_DATA}).")],
    model: Annotated[str, typer.Option(help="Chat model spec (e.g. openai:gpt-4o-mini).")],
    format: Annotated[
        str | None, typer.Option("--format", show_default='detect from the file', help="Input format.")
    ] = None,
    k: Annotated[
        list[int] | None,
        typer.Option(
            "--k", show_default='2 4 8 16 32 64', help="Exemplar counts; repeat (k=0 always added)."
        ),
    ] = None,
    pool_per_level: Annotated[
        int, typer.Option(help="Held-out exemplars per level.")
    ] = POOL_PER_LEVEL,
    train: Annotated[
        str | None,
        typer.Option(
            show_default='none: exemplars come from --data', help="Draw exemplars from this corpus instead (then every --data item is scored)."
        ),
    ] = None,
    train_format: Annotated[str | None, typer.Option(show_default='detect from the file', help="Format of --train.")] = None,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 42,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    failures: Annotated[str, typer.Option(help="'wrong' (farthest level) or 'drop'.")] = "wrong",
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Few-shot k sweep (Figure 4): every k scored on the same items outside the pool."""
    from carebench.engine.rundir import read_json, write_json
    from carebench.engine.skeleton import Plan, echo_plan, run_suite
    from carebench.risk.report import SWEEP_METRICS, sweep_rows
    from carebench.risk.suite import SweepSuite
    from carebench.risk.sweep import SWEEP_KS

    suite = SweepSuite(data, parse_spec(model), format=format, ks=list(k) if k else SWEEP_KS,
                       pool_per_level=pool_per_level, train=train, train_format=train_format,
                       seed=seed, bootstrap=bootstrap, failures=failures)
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
