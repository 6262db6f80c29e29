"""``carebench support run | calibrate | rescore | calibration-sample | coherence | probe``.

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from carebench.datasets.builtin import builtin_specs
from carebench.engagement.options import (
    EngagementOption,
    RefusalPolicyOption,
    RescoreRefusalPolicyOption,
)
from carebench.engine.options import RUN_FLAGS, RunOptions, run_flags
from carebench.models.base import parse_spec, parse_specs
from carebench.models.families import parse_family_overrides
from carebench.resources.options import LocaleOption, ResourcesOption
from carebench.types import CarebenchError

BUILTIN_TASKS = ", ".join(builtin_specs("support"))

app = typer.Typer(
    help="Rubric-scored crisis support with a calibrated judge panel (DistressBench).",
    no_args_is_help=True,
    add_completion=False,
)


def _caps(values: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values or []:
        spec, sep, n = v.rpartition("=")
        if not sep or not spec:
            raise CarebenchError(f"--cap expects SPEC=TOKENS, got {v!r}")
        try:
            out[spec] = int(n)
        except ValueError:
            raise CarebenchError(f"--cap {v!r}: {n!r} is not a token count") from None
    return out


@app.command()
@run_flags()
def run(
    tasks: Annotated[str, typer.Option(help=f"Task file (.jsonl/.csv/.parquet) or builtin:NAME (built in: {BUILTIN_TASKS}).")] = "builtin:sample",
    responder: Annotated[list[str] | None, typer.Option(show_default='none: give one, or --include-reference', help="Responder model spec (repeatable).")] = None,
    judge: Annotated[list[str] | None, typer.Option(show_default='none: give at least one', help="Judge model spec (repeat for the panel; DistressBench uses 3).")] = None,
    attempts: Annotated[int, typer.Option(help="Independent attempts per task.")] = 3,
    scope: Annotated[str, typer.Option(help="final (default), anywhere, or both (judge both; metrics final).")] = "final",
    system_prompt: Annotated[Path | None, typer.Option(show_default="none: the task's own, if any", help="File with a system prompt for responders.")] = None,
    include_reference: Annotated[bool, typer.Option(help="Score the task references with the same panel.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for sampling and bootstrap.")] = 12345,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    temperature: Annotated[float, typer.Option(help="Responder sampling temperature.")] = 0.7,
    max_tokens: Annotated[int, typer.Option(help="Default responder output cap (tokens).")] = 4096,
    cap: Annotated[list[str] | None, typer.Option(show_default='--max-tokens for every model', help="Per-model output cap SPEC=TOKENS (repeatable).")] = None,
    responder_option: Annotated[list[str] | None, typer.Option(
        show_default='none', help="Per-responder setting SPEC:key=value, key = temperature, max_tokens or top_p (repeatable; "
        "overrides --responder-settings).")] = None,
    responder_settings: Annotated[Path | None, typer.Option(
        show_default='none', help="TOML/JSON file with a table of settings per responder spec.")] = None,
    recollect_truncated: Annotated[bool, typer.Option(
        "--recollect-truncated", help="Ask truncated replies again with a larger cap, keeping both.")] = False,
    recollect_cap: Annotated[int | None, typer.Option(
        show_default="twice the responder's cap", help="Output cap for re-collection.")] = None,
    limit: Annotated[int | None, typer.Option(show_default='every task', help="Only the first N tasks.")] = None,
    columns: Annotated[str | None, typer.Option(
        show_default="carebench's field names", help="Your task file's column names: FIELD=COLUMN,... (e.g. id=case,turns=messages); "
             "id defaults to the row number.")] = None,
    split: Annotated[str, typer.Option(
        help="public, private or all tasks (§A.3: the file's split, else a stratified 50/50 split).")] = "all",
    subcategories: Annotated[Path | None, typer.Option(
        show_default='none: every name accepted, no warning', help="File of expected subcategory names (one per line); tasks outside it are kept and warned about.")] = None,
    retries: Annotated[int | None, typer.Option(show_default='6, transient failures only', help="Retries of a failed call before it counts as a harness failure.")] = None,
    family: Annotated[list[str] | None, typer.Option(
        show_default='the guess from each spec', help="Vendor family of a model, SPEC=NAME (repeatable); overrides the guess from the spec "
             "for models behind a proxy or local server (self-preference, DistressBench App. B.6-B.7).")] = None,
    options: RunOptions = RUN_FLAGS,
    task_format: Annotated[str, typer.Option("--format", help=(
        "Task file format: carebench, or healthbench (HealthBench-style prompt/rubrics JSONL; "
        "see docs/support.md)."))] = "carebench",
    axes_map: Annotated[Path | None, typer.Option(
        show_default='the built-in healthbench_axes.yaml', help="With --format healthbench: YAML map of rubric axes to the seven dimensions ")] = None,
    subcategory_tag: Annotated[str, typer.Option(
        help="With --format healthbench: the example tag prefix whose value is the subcategory.")] = "theme",
    score_as: Annotated[str, typer.Option("--score", help=(
        "carebench (the weighted score), or healthbench: also HealthBench's subtract-and-clip score "
        "(in metrics.json and the report).")) ] = "carebench",
    locale: LocaleOption = None,
    resources: ResourcesOption = None,
    engagement: EngagementOption = "prefilter",
    refusal_policy: RefusalPolicyOption = "seed",
    critical_min_weight: Annotated[float | None, typer.Option(
        min=1, show_default="the heaviest negative criterion weight of the task set",
        help="Negative criteria at least this heavy are critical (with those marked critical in the file): "
             "a failure on one gates the conversation's score to 0 in the gated mean.")] = None,
) -> None:
    """Regenerate replies, judge every criterion with the panel, score and report."""
    from carebench.engine.skeleton import Plan, echo_plan
    from carebench.support.config import SupportRunConfig, refuse_reference
    from carebench.support.suite import run_support

    refuse_reference(responder)
    cfg = SupportRunConfig(
        tasks=tasks, task_format=task_format, axes_map=str(axes_map) if axes_map else None,
        subcategory_tag=subcategory_tag, score=score_as, responders=parse_specs(responder), judges=parse_specs(judge), attempts=attempts,
        scope=scope, system_prompt_file=str(system_prompt) if system_prompt else None,
        include_reference=include_reference, seed=seed, bootstrap=bootstrap, temperature=temperature,
        max_tokens=max_tokens, caps=_caps(cap), task_limit=limit, columns=columns, split=split,
        subcategories_file=str(subcategories) if subcategories else None,
        responder_options=list(responder_option or []),
        responder_settings_file=str(responder_settings) if responder_settings else None,
        recollect_truncated=recollect_truncated, recollect_cap=recollect_cap,
        families=parse_family_overrides(family),
        options=replace(options, max_retries=retries),
        locale=locale, resources=str(resources) if resources else None,
        engagement=engagement, refusal_policy=refusal_policy, critical_min_weight=critical_min_weight,
    )
    result = run_support(cfg)
    if isinstance(result, Plan):
        echo_plan(result)
        return
    _summary(result)
    _exit_if_incomplete(result)


def _healthbench_summary(metrics: dict) -> None:
    """HealthBench's subtract-and-clip score beside the headline weighted score (metrics.json)."""
    from carebench.support.healthbench import HEADLINE_NOTE

    hb = metrics.get("healthbench")
    if not hb:
        return
    typer.echo(f"{'healthbench [95% CI]':<22}  {'weighted':>8}  responder   (HealthBench subtract-and-clip score)")
    for name, v in hb["responders"].items():
        lo, hi = v["ci"] if v.get("ci") else (float("nan"), float("nan"))
        score = f"{v['score']:.3f} [{lo:.3f}, {hi:.3f}]"
        typer.echo(f"{score:<22}  {v['weighted_score']:>8.3f}  {name}")
    typer.echo(HEADLINE_NOTE)


def _echoed_plan(result: object) -> bool:
    """A dry run's plan is printed (the JSON every suite prints); anything else is a result."""
    from carebench.engine.skeleton import Plan, echo_plan

    if isinstance(result, Plan):
        echo_plan(result)
        return True
    return False


def _exit_if_incomplete(run_dir: Path) -> None:
    from carebench.support.config import incomplete_message

    msg = incomplete_message(run_dir)
    if msg:
        typer.echo(f"carebench: {msg}", err=True)
        raise typer.Exit(1)


def _summary(run_dir: Path, metrics: dict | None = None) -> None:
    from carebench.engine.rundir import read_json

    m = metrics if metrics is not None else read_json(run_dir / "metrics.json")
    rows = m.get("leaderboard", {}).get("rows", [])
    ref = m.get("reference")
    if rows or ref:  # the leaderboard under a header row, the reference ceiling as its last row
        typer.echo(f"{'rank':>4}  {'score [95% CI]':<22}  {'band':>4}  responder")
    for row in rows:
        lo, hi = row["ci"] if row.get("ci") else (float("nan"), float("nan"))
        score = f"{row['score']:.3f} [{lo:.3f}, {hi:.3f}]"
        typer.echo(f"{row['rank']:>4}  {score:<22}  {row['band']:>4}  {row['responder']}")
    if ref:
        typer.echo(f"{'-':>4}  {ref['score']:<22.3f}  {'-':>4}  reference ceiling")
    _healthbench_summary(m)
    typer.echo(f"wrote {run_dir}/report.html")


@app.command()
@run_flags()
def calibrate(
    labels: Annotated[Path, typer.Option(help="Clinician labels: task_id, response_id (or responder+attempt), criterion_id, rater, met.")],
    candidate: Annotated[list[str] | None, typer.Option(show_default='none: needs --verdicts', help="Candidate judge spec (repeatable).")] = None,
    run_dir: Annotated[Path | None, typer.Option("--run", show_default='none: only --verdicts can be compared', help="Support run directory with the labelled responses.")] = None,
    verdicts: Annotated[Path | None, typer.Option(show_default='none: ask the --candidate judges', help="Recorded candidate verdicts (JSONL) instead of model calls.")] = None,
    panel_size: Annotated[int, typer.Option(help="Judges per panel.")] = 3,
    scope: Annotated[str, typer.Option(
        help="final (default), anywhere, or both: ask candidates in both scopes to compare them (B.9).")] = "final",
    seed: Annotated[int, typer.Option(
        help="Bootstrap seed of the leader's-lead interval (carebench default; the paper's 20260714 "
        "draws the calibration tasks, see calibration-sample).")] = 12345,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    family: Annotated[list[str] | None, typer.Option(
        show_default='the guess from each spec', help="Vendor family of a model, SPEC=NAME (repeatable); overrides the guess from the spec "
             "for models behind a proxy or local server (self-preference, DistressBench App. B.6-B.7).")] = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Compare candidate judges and every panel with clinician consensus; select the panel."""
    from carebench.support.suite import JudgeCalibrationConfig, run_calibration

    cfg = JudgeCalibrationConfig(
        labels=str(labels), candidates=parse_specs(candidate), run_dir=str(run_dir) if run_dir else None,
        verdicts=str(verdicts) if verdicts else None, panel_size=panel_size, seed=seed, scope=scope,
        bootstrap=bootstrap, families=parse_family_overrides(family),
        options=options,
    )
    d = run_calibration(cfg)
    if _echoed_plan(d):
        return
    from carebench.engine.rundir import read_json

    sel = read_json(d / "metrics.json").get("selection", {})
    typer.echo(f"{sel.get('n_panels', 0)} panels; selected: {', '.join(sel.get('selected', []))}")
    typer.echo(f"wrote {d}/report.html")


@app.command()
def rescore(
    run_dir: Annotated[Path, typer.Argument(help="A support run directory.")],
    panel: Annotated[list[str] | None, typer.Option(show_default="the run's own panel", help="Judge labels forming the panel (repeatable).")] = None,
    scope: Annotated[str | None, typer.Option(show_default="the run's own scope", help="final or anywhere (needs verdicts of that scope).")] = None,
    out: Annotated[Path | None, typer.Option(show_default='the run directory itself', help="Write metrics/report here instead of the run directory.")] = None,
    family: Annotated[list[str] | None, typer.Option(
        show_default="the run's own, else the guess from each spec", help="Vendor family of a model, SPEC=NAME (repeatable); overrides the guess from the spec "
             "for models behind a proxy or local server (self-preference, DistressBench App. B.6-B.7).")] = None,
    score_as: Annotated[str | None, typer.Option("--score", show_default="the run's own choice", help=(
        "carebench (the weighted score), or healthbench: also HealthBench's subtract-and-clip score, "
        "in metrics.json and the report (recorded in manifest.json when rescoring in place)."))] = None,
    resources: Annotated[Path | None, typer.Option(
        "--resources", show_default="the checks the run recorded",
        help="Re-check the recorded replies against this crisis-resource registry (no model call; needs --out).")]
    = None,
    locale: LocaleOption = None,
    refusal_policy: RescoreRefusalPolicyOption = None,
    critical_min_weight: Annotated[float | None, typer.Option(
        min=1, show_default="the run's own rule", help="Negative criteria at least this heavy are critical "
        "(with those marked critical in the file); no model call.")] = None,
) -> None:
    """Recompute metrics.json and the report from recorded verdicts (no model call)."""
    from carebench.support.suite import rescore as do_rescore

    metrics = do_rescore(run_dir, panel=list(panel) if panel else None, scope=scope, out_dir=out,
                         family=parse_family_overrides(family), score_as=score_as,
                         resources=str(resources) if resources else None, locale=locale,
                         refusal_policy=refusal_policy, critical_min_weight=critical_min_weight)
    _summary(Path(out or run_dir), metrics)


@app.command("calibration-sample")
def calibration_sample(
    tasks: Annotated[str, typer.Option(help=f"Task file (.jsonl/.csv/.parquet) or builtin:NAME (built in: {BUILTIN_TASKS}).")],
    n: Annotated[int, typer.Option(help="Calibration tasks to draw (DistressBench B.1: 75).")] = 75,
    seed: Annotated[int, typer.Option(help="Draw seed (DistressBench E.8: 20260714).")] = 20260714,
    strata: Annotated[str, typer.Option(help="Comma-separated strata: subcategory and/or metadata fields.")]
    = "subcategory,turn_structure",
    run_dir: Annotated[Path | None, typer.Option("--run", show_default='none: no labelling sheet', help="Support run whose replies go on the labelling sheet.")]
    = None,
    replies_per_task: Annotated[int, typer.Option(help="Recorded replies labelled per drawn task.")] = 4,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("calibration-sample"),
    task_format: Annotated[str, typer.Option("--format", help=(
        "Task file format: carebench, or healthbench (HealthBench-style JSONL).")) ] = "carebench",
    axes_map: Annotated[Path | None, typer.Option(
        show_default='the built-in healthbench_axes.yaml', help="With --format healthbench: YAML map of rubric axes to the seven dimensions.")] = None,
    subcategory_tag: Annotated[str, typer.Option(
        help="With --format healthbench: the example tag prefix whose value is the subcategory.")] = "theme",
) -> None:
    """Draw the stratified calibration tasks and write the clinicians' labelling sheet."""
    from carebench.support.calibration_sample import draw_tasks, sheet_rows, write_sample
    from carebench.support.healthbench_tasks import load_task_source

    all_tasks = load_task_source(tasks, task_format=task_format, axes_map=axes_map,
                                 subcategory_tag=subcategory_tag)
    names = [s.strip() for s in strata.split(",") if s.strip()]
    drawn, info = draw_tasks(all_tasks, n=n, seed=seed, strata=names)
    info["source"] = tasks
    sheet = None
    if run_dir is not None:
        from carebench.support.config import load_run

        _, _, responses, _ = load_run(run_dir)
        if replies_per_task < 1:
            raise CarebenchError(f"--replies-per-task must be at least 1, got {replies_per_task}")
        sheet = sheet_rows(drawn, responses, replies_per_task, seed)
        info["run"] = str(run_dir)
    write_sample(out, drawn, info, sheet)
    typer.echo(f"drew {len(drawn)} of {len(all_tasks)} tasks over {len(info['allocation'])} strata (seed {seed})")
    if sheet is not None:
        typer.echo(f"wrote {out}/criterion_sheet.jsonl ({len(sheet)} criterion judgments to label)")
    typer.echo(f"wrote {out}/calibration_tasks.jsonl and {out}/calibration_sample.json")


@app.command()
@run_flags()
def coherence(
    tasks: Annotated[str, typer.Option(help=f"Task file (.jsonl/.csv/.parquet) or builtin:NAME (built in: {BUILTIN_TASKS}).")],
    model: Annotated[list[str], typer.Option(help="Model whose replies test the scripts (repeatable; A.5 used 4).")],
    judge: Annotated[str, typer.Option(help="Judge model spec.")],
    n: Annotated[int, typer.Option(help="Multi-turn tasks to sample (A.5: 18).")] = 18,
    gate: Annotated[float, typer.Option(help="Share of acceptable transitions a task needs (A.5: 0.9).")] = 0.9,
    seed: Annotated[int, typer.Option(help="Sampling seed (carebench default).")] = 12345,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Multi-turn coherence gate (A.5): do the scripted user turns still follow regenerated replies?"""
    from carebench.engine.rundir import read_json
    from carebench.support.coherence import CoherenceConfig, run_coherence

    d = run_coherence(CoherenceConfig(
        tasks=tasks, models=parse_specs(model), judge=parse_spec(judge), n=n, gate=gate, seed=seed,
        options=options))
    if _echoed_plan(d):
        return
    m = read_json(d / "metrics.json")
    rate = m.get("overall_rate")
    typer.echo((f"{rate:.1%} acceptable transitions" if rate is not None else "no transition could be judged")
               + f"; tasks below the gate: {', '.join(m.get('failing_tasks') or []) or 'none'}")
    typer.echo(f"wrote {d}/report.html")


@app.command()
@run_flags()
def probe(
    run_dir: Annotated[Path, typer.Argument(help="A support run directory.")],
    responder: Annotated[list[str] | None, typer.Option(
        show_default='every responder of the run', help="A responder of the run to probe (repeatable).")] = None,
    alternative: Annotated[str, typer.Option(help="reference (clinician reference) or matched (a credited reply "
                                                  "of another responder).")] = "reference",
    question: Annotated[str, typer.Option(help="named: compare the replies on the failed criterion's aspect; "
                                               "blind: the better reply overall, criterion not named.")] = "named",
    competence_threshold: Annotated[float, typer.Option(
        help="Evaluator-competence check (E.7): a responder must prefer the compliant reply of the floor pairs "
             "more often than this share, else it is excluded from the decomposition (carebench default 0.5, "
             "chance).")] = 0.5,
    floor_reply: Annotated[Path | None, typer.Option(
        show_default="a built-in reply that ignores the person's message", help="Text file with the floor reply of the control pairs.")] = None,
    n_tasks: Annotated[int, typer.Option("--tasks-sample", help="Tasks probed (E.7: 120).")] = 120,
    conversations: Annotated[int, typer.Option(help="Conversations for elicitation, per responder (E.7: 300).")] = 300,
    seed: Annotated[int, typer.Option(help="Sampling and bootstrap seed (carebench default).")] = 12345,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples.")] = 2000,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Discrimination probe, controls and elicitation (§4.3, E.7): why did the responders fail their criteria?

    Writes its own run directory (default runs/support-probe-<time>), which names the probed run;
    the probed run is only read."""
    from carebench.engine.rundir import read_json
    from carebench.support.probe import ProbeConfig, run_probe

    d = run_probe(ProbeConfig(
        run_dir=str(run_dir), responders=list(responder or []), alternative=alternative, question=question,
        competence_threshold=competence_threshold, floor_reply=str(floor_reply) if floor_reply else None,
        n_tasks=n_tasks, n_conversations=conversations, seed=seed, bootstrap=bootstrap,
        options=options))
    if _echoed_plan(d):
        return
    res = read_json(d / "metrics.json")
    for spec, p in res["per_responder"].items():
        c = p["controls"]
        rate = "no valid answer" if c["rate"] is None else f"{c['rate']:.3f}"
        verdict = "kept" if p["competent"] else "EXCLUDED from the decomposition (uninformative evaluator)"
        typer.echo(f"{spec}: floor pairs {c['prefers_alternative']}/{c['valid']} prefer the compliant reply "
                   f"({rate}; threshold {c['threshold']}): {verdict}")
    dec = res["decomposition"]
    if dec.get("units"):
        typer.echo(f"standard divergence {dec['standard_divergence']['share']:.1%}, discrimination failure "
                   f"{dec['discrimination_failure']['share']:.1%} of forfeited weight ({dec['units']} units, "
                   f"{len(res['competent'])} responders)")
    e = res["elicitation"]["full_panel"]
    typer.echo(f"elicitation converted {e['converted']} of {e['criteria']} failed criteria")
    typer.echo(f"wrote {d}/report.html (probe of {run_dir})")
