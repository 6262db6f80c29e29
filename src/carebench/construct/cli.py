"""``carebench construct``: the dataset construction pipeline (VEILED-SH, §4).

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2.
Each command runs through the run skeleton (:mod:`carebench.construct.command`); a budget
stop ends with the run's ``RunStopped`` line (spent, calls left, how to resume) and exit code 3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from carebench.construct.command import ConstructOptions
from carebench.engine.options import RUN_FLAGS, RunOptions, run_flags

app = typer.Typer(
    help="Build a context-specific prompt set: screen, route personas, rewrite, judge, select, anonymize, review "
         "(VEILED-SH, §4).",
    no_args_is_help=True,
    add_completion=False,
)

Rows = Annotated[str, typer.Option("--rows", help="Input rows (JSONL/CSV/Parquet) from the previous stage.")]
Seed = Annotated[int, typer.Option(help="Seed for sampling and assignment.")]


def _done(result, what: str) -> None:
    """The run directory, or a dry run's plan (the shape every suite prints)."""
    from carebench.engine.skeleton import Plan, echo_plan

    if isinstance(result, Plan):
        echo_plan(result)
        return
    typer.echo(f"{what}: {result}")


@app.command()
@run_flags()
def screen(
    sources: Annotated[str, typer.Option(help="Source rows, or builtin:sources.")] = "builtin:sources",
    lexicon: Annotated[list[str] | None, typer.Option(show_default='none: the packaged lexicon only', help="Extra lexicon YAML (repeatable).")] = None,
    lexicon_replace: Annotated[bool, typer.Option(help="Use only the given lexicon files.")] = False,
    classifier: Annotated[str, typer.Option(help="none, llm:SPEC or scores:PATH.")] = "none",
    threshold: Annotated[float, typer.Option(help="Classifier score that retains a row.")] = 0.5,
    uncertain_low: Annotated[float, typer.Option(help="Scores from here to the threshold are uncertain.")] = 0.3,
    keep_share: Annotated[float, typer.Option(help="Share of hard negatives and of uncertain rows kept.")] = 0.25,
    seed: Seed = 42,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Screen source rows: lexicon, classifier, kept hard negatives (VEILED-SH §4.1)."""
    from carebench.construct.stages import screen_stage

    _done(screen_stage(sources, list(lexicon or []), lexicon_replace, classifier, threshold, uncertain_low,
                       keep_share, seed, ConstructOptions(options=options)), "screened")


@app.command()
@run_flags()
def route(
    rows: Rows,
    model: Annotated[str, typer.Option(help="Model for author sketches and the persona pick.")],
    personas: Annotated[str, typer.Option(help="Persona table (JSONL/CSV/Parquet), or builtin:personas.")] = "builtin:personas",
    embedder: Annotated[str, typer.Option(help="Embedder: builtin (packaged MiniLM), a local encoder dir, or hashing (bag of words).")] = "builtin",
    k: Annotated[int, typer.Option(min=1, help="Nearest personas offered to the picker.")] = 10,
    attributes: Annotated[str, typer.Option(help="Inferred attributes: inform (the picker) or filter (candidates).")] = "inform",
    id_field: Annotated[str, typer.Option(help="Persona table column with the id.")] = "id",
    text_field: Annotated[str, typer.Option(help="Persona table column with the description.")] = "text",
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Give each row a synthetic persona: sketch, embed, 10 nearest, pick (VEILED-SH §4.2)."""
    from carebench.construct.stages import route_stage

    _done(route_stage(rows, personas, model, embedder, k, attributes,
                      ConstructOptions(options=options), id_field, text_field), "routed")


@app.command()
@run_flags()
def rewrite(
    rows: Rows,
    rewriter: Annotated[list[str], typer.Option(help="Rewriter configuration: SPEC or fusion:A+B (repeatable).")],
    contexts: Annotated[str | None, typer.Option(show_default='the packaged contracts', help="Contexts YAML.")] = None,
    rewrite_context: Annotated[list[str] | None, typer.Option(show_default='counselor_chat, platform_search, triage', help="Rewrite contexts (repeatable).")] = None,
    forum_share: Annotated[float, typer.Option(help="Share of rows kept as forum posts.")] = 0.25,
    all_configs: Annotated[bool, typer.Option(help="Rewrite every row with every configuration (for selection).")] = False,
    expressions: Annotated[str | None, typer.Option(help="Optional reference expressions (JSONL).")] = "builtin:expressions",
    seed: Seed = 42,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Keep a forum sample, assign contexts, rewrite with round-robin rewriters (VEILED-SH §4.3)."""
    from carebench.construct.stages import rewrite_stage

    ctxs = list(rewrite_context or ["counselor_chat", "platform_search", "triage"])
    _done(rewrite_stage(rows, list(rewriter), contexts, ctxs, forum_share, all_configs, expressions, seed,
                        ConstructOptions(options=options)), "rewritten")


@app.command()
@run_flags()
def judge(
    rows: Rows,
    judge_model: Annotated[str, typer.Option("--judge", help="Construction judge model spec (temperature 0).")],
    contexts: Annotated[str | None, typer.Option(show_default='the packaged contracts', help="Contexts YAML.")] = None,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Judge every rewrite: three gates and five 1-5 scores (VEILED-SH Table 3)."""
    from carebench.construct.stages import judge_stage

    _done(judge_stage(rows, judge_model, contexts, ConstructOptions(options=options)), "judged")


@app.command()
@run_flags(only=("out",), no_cache=True)
def select(
    rows: Rows,
    severity: Annotated[float, typer.Option(min=0.0, max=1.0, help="Maximum severity-gate failure rate.")] = 0.05,
    leakage: Annotated[float, typer.Option(min=0.0, max=1.0, help="Maximum leakage-gate failure rate.")] = 0.05,
    format_limit: Annotated[float, typer.Option("--format", min=0.0, max=1.0,
                                                help="Maximum format-gate failure rate.")] = 0.20,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Gate-first selection of rewriter configurations, ranked by Q (VEILED-SH §4.3, Table 7)."""
    from carebench.construct.stages import select_stage

    limits = {"severity_preserved": severity, "no_leakage": leakage, "format_ok": format_limit}
    run_dir = select_stage(rows, limits, ConstructOptions(options=options))
    sel = json.loads((run_dir / "selection.json").read_text("utf-8"))
    typer.echo("selected: " + (", ".join(sel["selected"]) or "none"))
    _done(run_dir, "selection")


@app.command()
@run_flags(only=("out",), no_cache=True)
def anonymize(
    rows: Rows,
    backend: Annotated[str, typer.Option(help="presidio (patterns) or presidio:spacy=PIPELINE (adds NER).")] = "presidio",
    names: Annotated[str | None, typer.Option(show_default='none', help="Known names replaced as PERSON (one per line).")] = None,
    reversals: Annotated[str | None, typer.Option(help="Over-replacements to undo (one per line).")] = "builtin:reversals",
    literals: Annotated[str | None, typer.Option(show_default='none', help="Strings that must not survive (one per line).")] = None,
    on_residual: Annotated[str, typer.Option(help="error (stop) or drop (remove the rows).")] = "error",
    keep_gate_failures: Annotated[bool, typer.Option(help="Release rewrites that failed a judge gate.")] = False,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Anonymize released rows and write prompts in the plural suite's format (VEILED-SH §4.4, A.4)."""
    from carebench.construct.stages import anonymize_stage

    _done(anonymize_stage(rows, backend, names, reversals, literals, on_residual, not keep_gate_failures,
                          ConstructOptions(options=options)), "prompts")


@app.command("review-sample")
@run_flags(only=("out",), no_cache=True)
def review_sample(
    rows: Rows,
    total: Annotated[int, typer.Option(help="Items in the review sample.")] = 270,
    per_reviewer: Annotated[int, typer.Option(help="Items per reviewer.")] = 180,
    shared: Annotated[int, typer.Option(help="Items both reviewers see.")] = 90,
    reviewer: Annotated[list[str] | None, typer.Option(show_default='reviewer_1 and reviewer_2', help="Reviewer names (two).")] = None,
    seed: Seed = 42, options: RunOptions = RUN_FLAGS,
) -> None:
    """Draw the blind human-review sample and write one sheet per reviewer (VEILED-SH A.5)."""
    from carebench.construct.stages import review_sample_stage
    from carebench.types import CarebenchError

    who = tuple(reviewer or ("reviewer_1", "reviewer_2"))
    if len(who) != 2:
        raise CarebenchError("give exactly two --reviewer names")
    _done(review_sample_stage(rows, total, per_reviewer, shared, who, seed,  # type: ignore[arg-type]
                              ConstructOptions(options=options)), "review sheets")


@app.command("review-stats")
@run_flags(only=("out",), no_cache=True)
def review_stats(
    key: Annotated[str, typer.Option(help="The private key file written by review-sample.")],
    reviews: Annotated[list[str], typer.Option(help="Review answers (RewriteReview rows; repeatable).")],
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples within context-rewriter cells.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 12345,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """IPW failure rates and ratings with within-cell bootstrap intervals, and agreement (VEILED-SH A.5)."""
    from carebench.construct.stages import review_stats_stage

    _done(review_stats_stage(key, list(reviews), bootstrap, seed, ConstructOptions(options=options)),
          "review statistics")


@app.command()
@run_flags()
def build(
    config: Annotated[str | None, typer.Option(show_default='builtin:build, the illustrative set', help="Build config YAML.")] = None,
    model: Annotated[str | None, typer.Option(show_default='none: the config sets every role', help="Model spec for every role the config leaves unset.")] = None,
    limit: Annotated[int | None, typer.Option(show_default='every source row', help="Only the first N source rows (smoke runs).")] = None,
    options: RunOptions = RUN_FLAGS,
    allow_empty: Annotated[bool, typer.Option(
        "--allow-empty", help="Exit 0 even when no prompt is released (e.g. no configuration passed the gates).")] = False,
) -> None:
    """Run the whole chain from a config file and write prompts.jsonl for `carebench plural`."""
    from carebench.construct.config import load_build_config
    from carebench.construct.pipeline import build as run_build

    cfg = load_build_config(config or "builtin:build")
    if limit is not None:
        cfg = cfg.model_copy(update={"limit": limit})
    opts = ConstructOptions(options=options)
    opts.model = model
    result = run_build(cfg, opts)
    if not isinstance(result, Path):
        _done(result, "plan")
        return
    from carebench.engine.rundir import read_json

    m = read_json(result / "metrics.json")
    for s in m["stages"]:
        typer.echo(f"{s['step']:<10} {s['in']:>5} -> {s['out']:<5} {s['note']}")
    _done(result, "built")
    from carebench.engine.skeleton import failed_calls_message

    msg = failed_calls_message(result)
    if msg:
        typer.echo(f"carebench: {msg}", err=True)
        raise typer.Exit(1)
    prompts = result / "prompts.jsonl"
    released = sum(1 for line in prompts.read_text(encoding="utf-8").splitlines() if line.strip()) \
        if prompts.is_file() else None  # None: nothing released yet (e.g. a batch round)
    if released == 0 and not allow_empty:
        typer.echo(f"carebench: warning: the build released 0 prompts ({_why_empty(m)}); "
                   "pass --allow-empty to accept an empty release", err=True)
        raise typer.Exit(1)


def _why_empty(metrics: dict) -> str:
    """The last step that had rows in and none out, with its note."""
    for s in metrics.get("stages") or []:
        if s.get("in") and not s.get("out"):
            return f"{s['step']}: {s['note']}" if s.get("note") else s["step"]
    return "no rows reached the release"
