"""``carebench plural calibrate | freeze | label | agreement | sample | run | rescore``.

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from carebench.engagement.options import (
    EngagementOption,
    RefusalPolicyOption,
    RescoreRefusalPolicyOption,
)
from carebench.engine.options import RUN_FLAGS, Json, RunOptions, run_flags
from carebench.models.base import ModelSpec, parse_spec, parse_specs
from carebench.resources.options import LocaleOption, ResourcesOption
from carebench.types import CarebenchError

app = typer.Typer(
    help="Practitioner-calibrated reference policies and jury scoring (VEILED-SH).",
    no_args_is_help=True,
    add_completion=False,
)


# -- calibration side: calibrate, freeze, label, agreement (VEILED-SH, §5.2, Appendix B-C) -------


_MODEL = "Shared judge model spec (e.g. openai:gpt-4o-mini, llamacpp:builtin)."
_TAX = "Taxonomy YAML."
_CTX = "Application contexts YAML."

# options every model-calling calibration-side command takes (the run flags are the shared ones)
Embedder = Annotated[str | None, typer.Option(show_default="the packaged MiniLM", help="Embedder for retrieval.")]
Taxonomy = Annotated[Path | None, typer.Option(show_default="the packaged VEILED-SH taxonomy", help=_TAX)]
Contexts = Annotated[Path | None, typer.Option(show_default="the packaged contexts", help=_CTX)]
_BACKEND = ("E4/E5 guideline distillation: native, or mlflow (MLflow's MemAlignOptimizer, "
            "VEILED-SH Appendix B.2; pip install 'carebench[mlflow]').")


def _spec(model: str | None) -> ModelSpec | None:
    """``--model`` parsed here, once (None: the command's default model)."""
    return parse_spec(model) if model else None


def _opts(options: RunOptions, embedder=None, taxonomy=None, contexts=None, memalign_backend=None):
    """A calibration-side command's options: its own, and the shared run flags as ``options``."""
    return {
        "embedder": embedder,
        "taxonomy": str(taxonomy) if taxonomy else None,
        "contexts": str(contexts) if contexts else None,
        "memalign_backend": memalign_backend,
        "options": options,
    }


def _no_model_flags(command: str, budget: str, dry_run: str):
    """The run flags of a command that calls no model: its run directory, a budget it only
    accepts, and a dry run, each with its own help."""
    return run_flags(only=("out", "budget", "dry_run", "json_out"), no_cache=True, progress=False, declare={
        "out": Annotated[Path | None, typer.Option(show_default=f"runs/plural-{command}-<time>",
                                                   help="Run directory.")],
        "budget": Annotated[float | None, typer.Option(show_default="no cap", help=budget)],
        "dry_run": Annotated[bool, typer.Option("--dry-run", help=dry_run)]})


def _done(result, line) -> None:
    """A dry run's plan (the same JSON shape as every suite's), or the result's summary line."""
    from carebench.engine.skeleton import Plan, echo_plan

    if isinstance(result, Plan):
        echo_plan(result)
        return
    if isinstance(result, dict):
        typer.echo(json.dumps(result, indent=2))
        return
    from carebench.engine.rundir import read_json

    typer.echo(line(read_json(result / "metrics.json")))
    typer.echo(f"wrote {result}/report.html")


@app.command()
@run_flags()
def calibrate(
    model: Annotated[str | None, typer.Option(show_default='none: only E0 runs without one', help=_MODEL)] = None,
    method: Annotated[list[str] | None, typer.Option(show_default='E0-E5', help="Method to compare (repeatable).")] = None,
    prompts: Annotated[str, typer.Option(help="Prompts file (.jsonl/.csv/.parquet) or 'builtin'.")] = "builtin",
    annotations: Annotated[str, typer.Option(help="Practitioner annotations file or 'builtin'.")] = "builtin",
    practitioner: Annotated[list[str] | None, typer.Option(show_default='every practitioner', help="Only these practitioners (repeatable).")] = None,
    embedder: Embedder = None,
    folds: Annotated[int, typer.Option(min=2, help="Number of fixed folds (VEILED-SH, §5.2: 5).")] = 5,
    fold_seed: Annotated[int, typer.Option(help="Seed of the one shuffle that fixes the folds.")] = 20260714,
    margin: Annotated[float, typer.Option(help="Required macro-F1 gain over E0.")] = 0.03,
    min_probability: Annotated[float, typer.Option(min=0.0, max=1.0, help="Required paired-bootstrap probability of improvement.")] = 0.8,
    bootstrap: Annotated[int, typer.Option(min=1, help="Paired bootstrap resamples (seed 12345).")] = 2000,
    memalign_backend: Annotated[str, typer.Option(help=_BACKEND)] = "native",
    taxonomy: Taxonomy = None,
    contexts: Contexts = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Fit every method on five fixed folds per practitioner, write Table 5 and select per archetype."""
    from carebench.plural.calibration import METHOD_ORDER, ProfileCalibrationConfig
    from carebench.plural.commands.calibrate import run_calibrate

    cfg = ProfileCalibrationConfig(model=_spec(model), methods=list(method or METHOD_ORDER), prompts=prompts,
                          annotations=annotations, practitioners=list(practitioner) if practitioner else None,
                          folds=folds, fold_seed=fold_seed, margin=margin, min_probability=min_probability,
                          bootstrap=bootstrap, **_opts(options, embedder, taxonomy, contexts, memalign_backend))
    _done(run_calibrate(cfg), lambda m: "selected: " + ", ".join(
        f"{a} {s['method']}" + (" (fallback)" if s["warning"] else "") for a, s in m["selection"].items()))


@app.command()
@run_flags()
def freeze(
    calibration: Annotated[Path | None, typer.Option(show_default='none: --method names every method', help="A `plural calibrate` run directory (its selection).")] = None,
    method: Annotated[list[str] | None, typer.Option(show_default="the calibration's selection", help="ARCHETYPE=METHOD, overriding the selection (repeatable).")] = None,
    model: Annotated[str | None, typer.Option(show_default="the calibration run's model", help=_MODEL)] = None,
    prompts: Annotated[str, typer.Option(help="Prompts file or 'builtin' (default: the calibration run's).")] = "builtin",
    annotations: Annotated[str, typer.Option(help="Annotations file or 'builtin' (default: the calibration run's).")] = "builtin",
    memalign_backend: Annotated[str | None, typer.Option(show_default="the calibration run's, else native", help=_BACKEND)] = None,
    embedder: Embedder = None,
    taxonomy: Taxonomy = None,
    contexts: Contexts = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Refit the selected method once per practitioner on all calibration cases (profiles P1-P3, C1-C3)."""
    from carebench.plural.commands.freeze import run_freeze
    from carebench.plural.release import FreezeConfig

    cfg = FreezeConfig(calibration=str(calibration) if calibration else None, methods=list(method or []),
                       model=_spec(model), prompts=prompts, annotations=annotations,
                       **_opts(options, embedder, taxonomy, contexts, memalign_backend))
    _done(run_freeze(cfg), lambda m: "profiles: " + ", ".join(
        f"{a} ({v['method']})" for a, v in m["profiles"].items()))


@app.command()
@run_flags()
def label(
    profiles: Annotated[Path, typer.Option(help="A `plural freeze` run directory (or its profiles/ folder).")],
    prompts: Annotated[str, typer.Option(help="Prompts to label (file or 'builtin').")] = "builtin",
    release: Annotated[Path | None, typer.Option(show_default='RUN_DIR/release', help="Release directory.")] = None,
    model: Annotated[str | None, typer.Option(show_default="the profiles' model", help=_MODEL)] = None,
    embedder: Embedder = None,
    taxonomy: Taxonomy = None,
    contexts: Contexts = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Label every non-calibration prompt with every profile and write the release."""
    from carebench.plural.commands.label import run_label
    from carebench.plural.release import LabelConfig

    cfg = LabelConfig(profiles=str(profiles), prompts=prompts, release=str(release) if release else None,
                      model=_spec(model), **_opts(options, embedder, taxonomy, contexts))
    _done(run_label(cfg), lambda m: (
        f"excluded {m['excluded_for_leakage']['arithmetic']} for leakage; dropped {m['dropped']['total']}; "
        f"released {m['released']} prompts"))


@app.command()
@_no_model_flags("agreement", "Accepted for symmetry: no model is called.", "Print what would be compared and stop.")
def agreement(
    release: Annotated[Path, typer.Option(help="A release directory written by `plural label`.")],
    annotations: Annotated[str, typer.Option(help="Practitioner annotations file or 'builtin'.")] = "builtin",
    taxonomy: Taxonomy = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Label prevalence, policy size, per-label AC1 and Jaccard: practitioners vs profiles (Appendix C)."""
    from carebench.plural.agreement import AgreementConfig
    from carebench.plural.commands.agreement import run_agreement

    cfg = AgreementConfig(release=str(release), annotations=annotations,
                          taxonomy=str(taxonomy) if taxonomy else None,
                          options=options)
    _done(run_agreement(cfg), lambda m: "mean pairwise Jaccard: " + ", ".join(
        f"{k} {v:.3f}" for k, v in m["jaccard"].items()))

# -- evaluation side: sample, run, rescore (VEILED-SH, §5.3, §6, Appendix D) -------------------


def _pairs(values: list[str] | None, option: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values or []:
        key, sep, val = v.rpartition("=")
        if not sep or not key or not val:
            raise CarebenchError(f"{option} expects {what}, got {v!r}")
        out[key] = val
    return out


def _archetype_pairs(values: list[str] | None, option: str, what: str) -> dict[str, str]:
    """:func:`_pairs` keyed by a responder archetype (an unknown one would be ignored, silently)."""
    from carebench.plural.responses import ARCHETYPES

    out = _pairs(values, option, what)
    for key in out:
        if key not in ARCHETYPES:
            raise CarebenchError(f"{option} {key}=...: unknown archetype {key!r}; known: {', '.join(ARCHETYPES)}")
    return out


@app.command()
@_no_model_flags("sample", "USD cap (drawing a sample makes no model call).",
                 "Print the sample's composition and write nothing.")
def sample(
    release: Annotated[Path, typer.Option(help="Release directory written by `plural label`.")],
    size: Annotated[int | None, typer.Option(show_default='--fraction of the release', help="Sample size.")] = None,
    fraction: Annotated[float, typer.Option(help="Share of the release to sample (VEILED-SH, §5.3: about 20%).")] = 0.2,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 12345,
    reserve: Annotated[int, typer.Option(help="Rounds reserving one prompt per severity level.")] = 3,
    weighting: Annotated[float, typer.Option(help="Rarity weighting exponent (0 = uniform fill).")] = 1.0,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Draw the fixed diagnostic sample every system and archetype answers."""
    from carebench.plural.commands.sample import run_sample
    from carebench.plural.config import SampleRunConfig

    result = run_sample(SampleRunConfig(
        release=str(release), size=size, fraction=fraction, seed=seed, reserve=reserve, weighting=weighting,
        options=options))
    if isinstance(result, dict):  # a dry run: the composition (drawing a sample makes no call)
        typer.echo(json.dumps(result, indent=2))
        return
    from carebench.engine.rundir import read_json

    m = read_json(result / "metrics.json")
    typer.echo(f"sampled {m['sample_size']} of {m['release_prompts']} prompts ({m['reserved']} reserved for "
               f"severity levels); wrote {result}/sample.jsonl and report.html")


@app.command()
@run_flags()
def run(
    release: Annotated[Path, typer.Option(help="Release directory written by `plural label`, or builtin "
                                               "(a small illustrative release, to try the command).")],
    system: Annotated[list[str] | None, typer.Option(show_default='none: give at least one', help="System model spec to evaluate (repeatable).")] = None,
    judge: Annotated[list[str] | None, typer.Option(show_default='none: give at least one', help="Jury model spec (repeat; the paper's jury has three).")] = None,
    sample_dir: Annotated[Path | None, typer.Option("--sample", show_default='draw one', help="A `plural sample` run directory or its sample.jsonl.")] = None,
    sample_size: Annotated[int | None, typer.Option(show_default='--fraction 0.2 of the release', help="Size of the sample drawn when --sample is not given.")] = None,
    sample_seed: Annotated[int, typer.Option(help="Seed of the sample drawn when --sample is not given.")] = 12345,
    limit: Annotated[int | None, typer.Option(show_default='every sampled prompt', help="Only the first N sampled prompts (smoke runs).")] = None,
    archetype: Annotated[list[str] | None, typer.Option(show_default='peer and clinician', help="Responder archetype(s): peer, clinician.")] = None,
    taxonomy: Annotated[Path | None, typer.Option(show_default='the built-in one', help="Taxonomy YAML overriding the built-in one.")] = None,
    contexts: Annotated[Path | None, typer.Option(show_default='the built-in one', help="Application contexts YAML overriding the built-in one.")] = None,
    max_tokens: Annotated[int, typer.Option(help="System output cap in tokens (VEILED-SH, §5.3: 1,024).")] = 1024,
    temperature: Annotated[float, typer.Option(min=0.0, help="System sampling temperature.")] = 0.0,
    reasoning_effort: Annotated[str | None, typer.Option(show_default='none sent', help="Reasoning effort for systems that take one (the paper: medium).")] = None,
    instruction: Annotated[list[str] | None, typer.Option(show_default='the built-in instructions', help="ARCHETYPE=FILE replacing a built-in responder instruction.")] = None,
    judge_max_tokens: Annotated[int, typer.Option(help="Judge output cap in tokens.")] = 600,
    family: Annotated[list[str] | None, typer.Option(show_default='the guess from each spec', help="SPEC=FAMILY overriding a model's guessed vendor family.")] = None,
    seed: Annotated[int, typer.Option(help="Cluster-bootstrap seed.")] = 12345,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    empty_policy: Annotated[str, typer.Option(help="Empty-policy rule: vacuous or exclude.")] = "vacuous",
    zero_coverage: Annotated[str, typer.Option(help="Appropriate but nothing satisfied: partial or failed.")] = "partial",
    options: RunOptions = RUN_FLAGS,
    locale: LocaleOption = None, resources: ResourcesOption = None,
    engagement: EngagementOption = "prefilter",
    refusal_policy: RefusalPolicyOption = "seed",
) -> None:
    """Responses under both archetype instructions, the jury, scoring and the report."""
    from carebench.plural.commands.run import run_plural
    from carebench.plural.config import PluralRunConfig

    cfg = PluralRunConfig(
        release=str(release), systems=parse_specs(system), judges=parse_specs(judge),
        sample=str(sample_dir) if sample_dir else None, sample_size=sample_size, sample_seed=sample_seed,
        limit=limit, archetypes=list(archetype or ["peer", "clinician"]),
        taxonomy=str(taxonomy) if taxonomy else None, contexts=str(contexts) if contexts else None,
        max_tokens=max_tokens, temperature=temperature, reasoning_effort=reasoning_effort,
        instruction_files=_archetype_pairs(instruction, "--instruction", "ARCHETYPE=FILE"),
        judge_max_tokens=judge_max_tokens, families=_pairs(family, "--family", "SPEC=FAMILY"), seed=seed,
        bootstrap=bootstrap, empty_policy=empty_policy, zero_coverage=zero_coverage,
        locale=locale, resources=str(resources) if resources else None,
        engagement=engagement, refusal_policy=refusal_policy,
        options=options,
    )
    result = run_plural(cfg)
    from carebench.engine.skeleton import Plan, echo_plan

    if isinstance(result, Plan):
        echo_plan(result)
        return
    _summary(result)
    from carebench.engine.skeleton import failed_calls_message

    msg = failed_calls_message(result)
    if msg:
        typer.echo(f"carebench: {msg}", err=True)
        raise typer.Exit(1)


def _summary(run_dir: Path) -> None:
    from carebench.engine.rundir import read_json

    manifest = read_json(run_dir / "manifest.json")
    for w in manifest.get("warnings") or []:
        typer.echo(f"warning: {w}", err=True)
    m = read_json(run_dir / "metrics.json")
    if m.get("status") == "incomplete":
        typer.echo(f"incomplete run ({', '.join(m['incomplete'])} cut short by its budget): nothing is scored; "
                   "re-run the same command to finish it from the cache")
        return
    typer.echo(f"{'profile':<8} {'system':<40} {'full % [95% CI]':<24} coverage %")
    for c in m["cells"]:
        f, cov = c["full"], c["coverage"]
        ci = f.get("ci") or [None, None]
        full = "-" if f["value"] is None else f"{100 * f['value']:.1f}"
        if ci[0] is not None:
            full += f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
        cv = "-" if cov["value"] is None else f"{100 * cov['value']:.1f}"
        typer.echo(f"{c['profile']:<8} {c['system']:<40} {full:<24} {cv}")
    typer.echo(f"wrote {run_dir}/report.html")


@app.command()
def rescore(
    run_dir: Annotated[Path, typer.Argument(help="A `plural run` directory.")],
    judge: Annotated[list[str] | None, typer.Option(show_default='every judge of the run', help="Score with only these judges (repeatable).")] = None,
    out: Annotated[Path | None, typer.Option(show_default='the run directory itself', help="Write metrics and report here instead of the run directory.")] = None,
    budget: Annotated[float | None, typer.Option(show_default='no cap', help="USD cap (rescoring makes no model call).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be rescored and write nothing.")] = False,
    json_out: Json = False,
    resources: Annotated[Path | None, typer.Option(
        "--resources", show_default="the checks the run recorded",
        help="Re-check the recorded replies against this crisis-resource registry (no model call; needs --out).")]
    = None,
    locale: LocaleOption = None,
    refusal_policy: RescoreRefusalPolicyOption = None,
) -> None:
    """Recompute metrics.json and the report from the recorded verdicts (no model call)."""
    from carebench.engine.skeleton import echo_plan
    from carebench.plural.commands.run import rescore as do_rescore
    from carebench.plural.commands.run import rescore_plan

    if dry_run:
        echo_plan(rescore_plan(run_dir, out))
        return
    do_rescore(run_dir, judges=list(judge) if judge else None, out_dir=out,
               resources=str(resources) if resources else None, locale=locale, refusal_policy=refusal_policy)
    _summary(Path(out or run_dir))
