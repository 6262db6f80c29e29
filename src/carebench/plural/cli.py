"""``carebench plural calibrate | freeze | label | agreement | sample | run | rescore``.

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    help="Practitioner-calibrated reference policies and jury scoring (VEILED-SH).",
    no_args_is_help=True,
    add_completion=False,
)


# -- calibration side: calibrate, freeze, label, agreement (VEILED-SH, §5.2, Appendix B-C) -------

import json as _cjson  # noqa: E402
from pathlib import Path as _Path  # noqa: E402
from typing import Annotated as _A  # noqa: E402

_MODEL = "Shared judge model spec (e.g. openai:gpt-4o-mini, llamacpp:builtin)."
_TAX = "Taxonomy YAML (default: the packaged VEILED-SH taxonomy)."
_CTX = "Application contexts YAML (default: the packaged contexts)."
_OUT = "Run directory (default runs/plural-<command>-<time>)."
_BUDGET = "Stop starting calls once this many USD are spent (run-wide)."
_DRY = "Print the call plan and stop."


def _opts(**kw):
    return {
        "out": str(kw["out"]) if kw.get("out") else None,
        "cache_path": str(kw["cache"]) if kw.get("cache") else None,
        "use_cache": not kw.get("no_cache", False),
        "budget_usd": kw.get("budget"),
        "dry_run": kw.get("dry_run", False),
        "concurrency": kw.get("concurrency"),
        "embedder": kw.get("embedder"),
        "taxonomy": str(kw["taxonomy"]) if kw.get("taxonomy") else None,
        "contexts": str(kw["contexts"]) if kw.get("contexts") else None,
    }


def _done(result, line) -> None:
    if isinstance(result, dict):
        typer.echo(_cjson.dumps(result, indent=2))
        return
    from carebench.rundir import read_json

    typer.echo(line(read_json(result / "metrics.json")))
    typer.echo(f"wrote {result}/report.html")


@app.command()
def calibrate(
    model: _A[str | None, typer.Option(help=_MODEL)] = None,
    method: _A[list[str] | None, typer.Option(help="Method to compare (repeatable; default E0-E5).")] = None,
    prompts: _A[str, typer.Option(help="Prompts file (.jsonl/.csv/.parquet) or 'builtin'.")] = "builtin",
    annotations: _A[str, typer.Option(help="Practitioner annotations file or 'builtin'.")] = "builtin",
    practitioner: _A[list[str] | None, typer.Option(help="Only these practitioners (repeatable).")] = None,
    embedder: _A[str | None, typer.Option(help="Embedder for E0/E4/E5 retrieval (default: packaged MiniLM).")] = None,
    folds: _A[int, typer.Option(help="Number of fixed folds (VEILED-SH, §5.2: 5).")] = 5,
    fold_seed: _A[int, typer.Option(help="Seed of the one shuffle that fixes the folds.")] = 20260714,
    margin: _A[float, typer.Option(help="Required macro-F1 gain over E0.")] = 0.03,
    min_probability: _A[float, typer.Option(help="Required paired-bootstrap probability of improvement.")] = 0.8,
    bootstrap: _A[int, typer.Option(help="Paired bootstrap resamples (seed 12345).")] = 2000,
    taxonomy: _A[_Path | None, typer.Option(help=_TAX)] = None,
    contexts: _A[_Path | None, typer.Option(help=_CTX)] = None,
    out: _A[_Path | None, typer.Option(help=_OUT)] = None,
    no_cache: _A[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    cache: _A[_Path | None, typer.Option(help="Cache file (default: user cache dir).")] = None,
    budget: _A[float | None, typer.Option(help=_BUDGET)] = None,
    dry_run: _A[bool, typer.Option("--dry-run", help=_DRY)] = False,
    concurrency: _A[int | None, typer.Option(help="Concurrent calls per model.")] = None,
) -> None:
    """Fit every method on five fixed folds per practitioner, write Table 5 and select per archetype."""
    from carebench.plural.calibration import METHOD_ORDER, CalibrateConfig, run_calibrate

    cfg = CalibrateConfig(model=model, methods=list(method or METHOD_ORDER), prompts=prompts,
                          annotations=annotations, practitioners=list(practitioner) if practitioner else None,
                          folds=folds, fold_seed=fold_seed, margin=margin, min_probability=min_probability,
                          bootstrap=bootstrap, **_opts(**locals()))
    _done(run_calibrate(cfg), lambda m: "selected: " + ", ".join(
        f"{a} {s['method']}" + (" (fallback)" if s["warning"] else "") for a, s in m["selection"].items()))


@app.command()
def freeze(
    calibration: _A[_Path | None, typer.Option(help="A `plural calibrate` run directory (its selection).")] = None,
    method: _A[list[str] | None, typer.Option(help="ARCHETYPE=METHOD, overriding the selection (repeatable).")] = None,
    model: _A[str | None, typer.Option(help=_MODEL + " Default: the calibration run's model.")] = None,
    prompts: _A[str, typer.Option(help="Prompts file or 'builtin' (default: the calibration run's).")] = "builtin",
    annotations: _A[str, typer.Option(help="Annotations file or 'builtin' (default: the calibration run's).")] = "builtin",
    embedder: _A[str | None, typer.Option(help="Embedder for retrieval (default: packaged MiniLM).")] = None,
    taxonomy: _A[_Path | None, typer.Option(help=_TAX)] = None,
    contexts: _A[_Path | None, typer.Option(help=_CTX)] = None,
    out: _A[_Path | None, typer.Option(help=_OUT)] = None,
    no_cache: _A[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    cache: _A[_Path | None, typer.Option(help="Cache file (default: user cache dir).")] = None,
    budget: _A[float | None, typer.Option(help=_BUDGET)] = None,
    dry_run: _A[bool, typer.Option("--dry-run", help=_DRY)] = False,
    concurrency: _A[int | None, typer.Option(help="Concurrent calls per model.")] = None,
) -> None:
    """Refit the selected method once per practitioner on all calibration cases (profiles P1-P3, C1-C3)."""
    from carebench.plural.release import FreezeConfig, run_freeze

    cfg = FreezeConfig(calibration=str(calibration) if calibration else None, methods=list(method or []),
                       model=model, prompts=prompts, annotations=annotations, **_opts(**locals()))
    _done(run_freeze(cfg), lambda m: "profiles: " + ", ".join(
        f"{a} ({v['method']})" for a, v in m["profiles"].items()))


@app.command()
def label(
    profiles: _A[_Path, typer.Option(help="A `plural freeze` run directory (or its profiles/ folder).")],
    prompts: _A[str, typer.Option(help="Prompts to label (file or 'builtin').")] = "builtin",
    release: _A[_Path | None, typer.Option(help="Release directory (default RUN_DIR/release).")] = None,
    model: _A[str | None, typer.Option(help=_MODEL + " Default: the profiles' model.")] = None,
    embedder: _A[str | None, typer.Option(help="Embedder for retrieval (default: packaged MiniLM).")] = None,
    taxonomy: _A[_Path | None, typer.Option(help=_TAX)] = None,
    contexts: _A[_Path | None, typer.Option(help=_CTX)] = None,
    out: _A[_Path | None, typer.Option(help=_OUT)] = None,
    no_cache: _A[bool, typer.Option("--no-cache", help="Neither read nor write the cache.")] = False,
    cache: _A[_Path | None, typer.Option(help="Cache file (default: user cache dir).")] = None,
    budget: _A[float | None, typer.Option(help=_BUDGET)] = None,
    dry_run: _A[bool, typer.Option("--dry-run", help=_DRY)] = False,
    concurrency: _A[int | None, typer.Option(help="Concurrent calls per model.")] = None,
) -> None:
    """Label every non-calibration prompt with every profile and write the release."""
    from carebench.plural.release import LabelConfig, run_label

    cfg = LabelConfig(profiles=str(profiles), prompts=prompts, release=str(release) if release else None,
                      model=model, **_opts(**locals()))
    _done(run_label(cfg), lambda m: (
        f"excluded {m['excluded_for_leakage']['arithmetic']} for leakage; dropped {m['dropped']['total']}; "
        f"released {m['released']} prompts"))


@app.command()
def agreement(
    release: _A[_Path, typer.Option(help="A release directory written by `plural label`.")],
    annotations: _A[str, typer.Option(help="Practitioner annotations file or 'builtin'.")] = "builtin",
    taxonomy: _A[_Path | None, typer.Option(help=_TAX)] = None,
    out: _A[_Path | None, typer.Option(help=_OUT)] = None,
    budget: _A[float | None, typer.Option(help="Accepted for symmetry: no model is called.")] = None,
    dry_run: _A[bool, typer.Option("--dry-run", help="Print what would be compared and stop.")] = False,
) -> None:
    """Label prevalence, policy size, per-label AC1 and Jaccard: practitioners vs profiles (Appendix C)."""
    from carebench.plural.agreement import AgreementConfig, run_agreement

    cfg = AgreementConfig(release=str(release), annotations=annotations,
                          taxonomy=str(taxonomy) if taxonomy else None, out=str(out) if out else None,
                          dry_run=dry_run, budget_usd=budget)
    _done(run_agreement(cfg), lambda m: "mean pairwise Jaccard: " + ", ".join(
        f"{k} {v:.3f}" for k, v in m["jaccard"].items()))
