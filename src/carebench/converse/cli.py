"""``carebench converse run | judge | score | rescore | import-vera``.

User errors raise ``CarebenchError``; the top-level CLI prints one line and exits 2. A run
with harness failures is written, scored without them, and exits 1; a budget stop exits 3.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from carebench.converse.rubric import BUILTIN_RUBRICS
from carebench.engagement.options import EngagementOption
from carebench.engine.options import RUN_FLAGS, RunOptions, run_flags
from carebench.models.base import parse_spec, parse_specs
from carebench.resources.options import LocaleOption, ResourcesOption, recheck_against
from carebench.types import CarebenchError

app = typer.Typer(help="Simulated multi-turn conversations judged with decision-tree rubrics (VERA-MH).",
                  no_args_is_help=True, add_completion=False)

Rubric = Annotated[str | None, typer.Option(
    show_default="none: give one", help=f"Rubric: built in {', '.join(BUILTIN_RUBRICS)}; or a VERA-MH TSV, a YAML rubric, "
         "a bundle directory with manifest.json, or vera:PATH (a VERA-MH checkout, or its data/SI or data/HFO "
         "folder: rubric, personas and persona templates together).")]
Judge = Annotated[list[str] | None, typer.Option(show_default="none: give at least one", help="Judge model spec (repeatable: several judges).")]
RubricRules = Annotated[str | None, typer.Option(
    "--rubric-rules", show_default="the rubric's own: vera for VERA-MH files, carebench for YAML rubrics",
    help="How the walk reads the tree: vera (VERA-MH 2.0's judge and scorer), vera-1.2 (its 1.x judge), "
         "carebench, or vera+OPTION with carebench's named deviations: gate-end-keeps-walked, "
         "risk-type-branches, yelow-is-yellow, not-relevant-final, exact-answers (docs/converse.md).")]
JudgePrompts = Annotated[str, typer.Option(
    help="target (a vera: rubric's own judge prompt files when its target folder has them, filled as VERA-MH's "
         "judge fills them) or carebench (carebench's prompts). --judge-system/--judge-question replace both.")]
JudgeFrom = Annotated[Path | None, typer.Option(
    show_default="none", help="Add the judge a 'converse calibrate' directory selected (its selection.json); "
    "the run records the directory, the selection's hash and its figures.")]
SimulatorQuestions = Annotated[str | None, typer.Option(
    show_default="none: only the deterministic role-reversal check",
    help="Comma-separated judge questions on the simulated user, asked once per finished conversation: "
         "role-reversal (did the user ever write as the assistant?), risk-consistency (did the user stay "
         "consistent with the persona's stated risk level?). Shares per simulator in the report.")]
SimulatorJudge = Annotated[str | None, typer.Option(
    show_default="the first --judge", help="With --simulator-questions: the model spec that answers them.")]
Drift = Annotated[str | None, typer.Option(
    "--drift", metavar="RUBRIC", show_default="none: no per-turn ratings",
    help="Rate every chatbot turn on the drift rubric (sycophancy, delusion reinforcement, escalation, "
         "withdrawal, de-escalation, pushback, referral; intensity 0-3) with every --judge: 'builtin' or a YAML "
         "drift rubric. Adds capped weighted sums per conversation, rates by turn, slopes with conversation-"
         "bootstrap intervals, and a withdrawal measure without a model (docs/converse.md, Drift).")]
Seed = Annotated[int, typer.Option(help="Seed of sampling and of the bootstrap.")]
Bootstrap = Annotated[int, typer.Option(min=1, help="Bootstrap resamples (personas resampled).")]


def _finish(run_dir: Path) -> None:
    from carebench.engine.rundir import read_json

    m = read_json(run_dir / "manifest.json")
    typer.echo(f"wrote {run_dir / 'report.html'} and {run_dir / 'scores.csv'}")
    f = m.get("failures") or {}
    if f.get("judge_context"):
        from carebench.converse.judging import CONTEXT_ADVICE

        typer.echo(f"carebench: {f['judge_context']} walk(s) stopped: {CONTEXT_ADVICE} (counted as judge "
                   "failures, never rated)", err=True)
    judged = "criteria-judged conversation(s)" if (m.get("scoring") or {}).get("criteria") == "task" else "walk(s)"
    if f.get("harness") or f.get("judge_calls") or f.get("simulator_question_calls") or f.get("drift_calls"):
        sq = (f" and {f['simulator_question_calls']} question(s) on the simulated user"
              if f.get("simulator_question_calls") else "")
        sq += f" and {f['drift_calls']} drift rating(s)" if f.get("drift_calls") else ""
        typer.echo(f"carebench: run incomplete: {f.get('harness', 0)} conversation(s) and "
                   f"{f.get('judge_calls', 0)} {judged}{sq} had a call that failed after every retry (harness "
                   "failures): never rated, counted in the report. Re-run the same command to retry them",
                   err=True)
        raise typer.Exit(1)


def _with_judge_from(cfg, judge_from):
    if judge_from is None:
        return cfg
    from carebench.converse.calibration_run import judge_from as read_selection

    sel = read_selection(str(judge_from))
    try:  # the selected judge's spec, as the calibration directory recorded its text
        spec = parse_spec(sel["spec"])
    except CarebenchError as e:
        raise CarebenchError(f"--judge-from {judge_from}: {e}") from None
    return replace(cfg, judges=[*cfg.judges, spec], judge_from=sel)


def _go(cfg) -> None:
    from carebench.converse.suite import run_converse
    from carebench.engine.skeleton import echo_plan

    res = run_converse(cfg)
    if cfg.options.dry_run:
        echo_plan(res)  # type: ignore[arg-type]
        return
    _finish(Path(res))  # type: ignore[arg-type]


@app.command()
@run_flags()
def run(
    rubric: Rubric = None, rubric_rules: RubricRules = None,
    simulator: Annotated[list[str] | None, typer.Option(show_default='none: give at least one', help="User-simulator model spec (repeatable).")] = None,
    chatbot: Annotated[list[str] | None, typer.Option(show_default='none: give at least one', help="Chatbot under test (repeatable).")] = None,
    judge: Judge = None, judge_from: JudgeFrom = None,
    personas: Annotated[str | None, typer.Option(
        show_default="builtin:sample, or the bundle's", help="Persona file (.tsv/.csv/.jsonl) or builtin:sample.")] = None,
    personas_from: Annotated[str | None, typer.Option(
        show_default='none: --personas is read as it is', help="Build personas from the seeds' cases: support-tasks or plural-prompts (--personas is "
             "then that file; default builtin:sample). Each opens with the case's first message.")] = None,
    persona_template: Annotated[Path | None, typer.Option(show_default="the built-in template, or the bundle's", help="Persona prompt template file.")] = None,
    persona: Annotated[list[str] | None, typer.Option(show_default='every persona', help="Only this persona id (repeatable).")] = None,
    system_prompt: Annotated[Path | None, typer.Option(show_default='none', help="The chatbot's system prompt file.")] = None,
    judge_system: Annotated[Path | None, typer.Option(show_default="the built-in prompt, or the bundle's", help="Judge system prompt file.")] = None,
    judge_question: Annotated[Path | None, typer.Option(show_default="the built-in template, or the bundle's", help="Judge question template file.")] = None,
    judge_prompts: JudgePrompts = "target",
    turns: Annotated[int | None, typer.Option(
        show_default="20 exchanges; 30 messages under --protocol vera",
        help="Most turns per conversation, in --turn-unit units.")] = None,
    turn_unit: Annotated[str | None, typer.Option(
        show_default="exchanges; messages under --protocol vera",
        help="What --turns counts: exchanges (a user message and the reply) or messages (VERA-MH's -t: "
             "30 is 15 exchanges; raised by one when needed so the chatbot speaks last).")] = None,
    protocol: Annotated[str | None, typer.Option(
        show_default="vera for a vera: rubric, else carebench",
        help="carebench or vera: the defaults of --turns, --turn-unit, --persona-reminder and "
             "--default-system-prompt (VERA-MH's: 30 messages, reminder on, a helpful-assistant prompt).")] = None,
    provider_speaks_first: Annotated[bool, typer.Option(
        "--provider-speaks-first", help="The chatbot writes the first message; the simulated user answers.")] = False,
    persona_reminder: Annotated[bool | None, typer.Option(
        "--persona-reminder/--no-persona-reminder", show_default="on under --protocol vera, else off",
        help="Prefix the chatbot's latest message, in the simulator's view, with a reminder of its role "
             "(keeps the simulator from drifting into the assistant's role).")] = None,
    sessions: Annotated[str | None, typer.Option(
        show_default="one session",
        help="Comma-separated session names (e.g. intake,coaching): each persona and repeat plays one "
             "conversation per session, each judged on its own.")] = None,
    max_total_words: Annotated[int | None, typer.Option(
        show_default="no cap", help="End a conversation once its messages hold this many words "
        "(checked after each chatbot reply).")] = None,
    default_system_prompt: Annotated[str | None, typer.Option(
        show_default="none; assistant under --protocol vera",
        help="Without --system-prompt: none, or assistant (a one-line helpful-assistant system prompt).")] = None,
    repeats: Annotated[int, typer.Option(help="Conversations per simulator x chatbot x persona.")] = 1,
    temperature: Annotated[float, typer.Option(help="Chatbot and simulator temperature.")] = 0.7,
    max_tokens: Annotated[int, typer.Option(help="Chatbot output cap (tokens).")] = 1024,
    simulator_max_tokens: Annotated[int, typer.Option(help="Simulator output cap (tokens).")] = 512,
    judge_max_tokens: Annotated[int, typer.Option(help="Judge output cap (tokens).")] = 400,
    judge_mode: Annotated[str, typer.Option(
        help="question (one call per rubric question, default) or dimension (one call per dimension).")] = "question",
    criteria: Annotated[str, typer.Option(
        help="tree (walk --rubric, default) or task: judge each conversation against its support task's own "
             "weighted criteria with support's panel (needs --personas-from support-tasks).")] = "tree",
    criteria_scope: Annotated[str, typer.Option(
        help="With --criteria task: anywhere (any chatbot turn earns a criterion, default) or final "
             "(only the last chatbot turn).")] = "anywhere",
    retries: Annotated[int | None, typer.Option(
        show_default="the runner's: 6, transient failures only", help="Retries of a failed call before it is a harness failure.")] = None,
    simulator_questions: SimulatorQuestions = None, simulator_judge: SimulatorJudge = None,
    drift: Drift = None, engagement: EngagementOption = "prefilter",
    seed: Seed = 12345, bootstrap: Bootstrap = 2000,
    vera_config: Annotated[Path | None, typer.Option(
        show_default="none", help="Replay a VERA-MH run config (its vera CLI's JSON): its target, chatbot, user "
        "models, judges, turns, speaker order, sessions and word cap; each setting carebench cannot honour is "
        "named. --rubric vera:PATH gives the VERA-MH checkout its paths resolve against.")] = None,
    options: RunOptions = RUN_FLAGS,
    locale: LocaleOption = None, resources: ResourcesOption = None,
) -> None:
    """Simulate conversations, walk the rubric over each with each judge, score, report."""
    from carebench.converse.simulator_questions import parse_names
    from carebench.converse.suite import ConverseConfig

    replay = None
    if vera_config is not None:
        replay = _vera_replay(vera_config, rubric, simulator=simulator, chatbot=chatbot, judge=judge,
                              turns=turns, turn_unit=turn_unit, provider_speaks_first=provider_speaks_first,
                              sessions=sessions, max_total_words=max_total_words, repeats=repeats)
        rubric, simulator, chatbot = replay.rubric, [str(s) for s in replay.simulators], \
            [str(c) for c in replay.chatbots]
        judge = [str(j) for j in replay.judges] or judge
        turns, turn_unit, provider_speaks_first = replay.turns, "messages", replay.provider_speaks_first
        sessions = ",".join(replay.sessions) if replay.sessions else None
        max_total_words, repeats = replay.max_total_words, replay.repeats
        persona = replay.persona_ids() or persona
        from carebench.models.options import collect_model_options

        options = replace(options, model_options={**collect_model_options(None, replay.model_options),
                                                  **options.model_options})
    cfg = ConverseConfig(
        rubric=rubric, rubric_rules=rubric_rules, personas=personas, personas_from=personas_from, persona_template=str(persona_template) if persona_template else None,
        judge_system=str(judge_system) if judge_system else None,
        judge_question=str(judge_question) if judge_question else None, judge_prompts=judge_prompts,
        simulators=parse_specs(simulator), chatbots=parse_specs(chatbot), judges=parse_specs(judge),
        system_prompt_file=str(system_prompt) if system_prompt else None, turns=turns, repeats=repeats,
        persona_ids=list(persona) if persona else None, seed=seed, bootstrap=bootstrap,
        temperature=temperature, max_tokens=max_tokens, simulator_max_tokens=simulator_max_tokens,
        judge_max_tokens=judge_max_tokens, judge_mode=judge_mode, criteria=criteria,
        criteria_scope=criteria_scope, protocol=protocol, turn_unit=turn_unit,
        provider_speaks_first=provider_speaks_first, persona_reminder=persona_reminder,
        sessions=[x.strip() for x in sessions.split(",")] if sessions is not None else [],
        max_total_words=max_total_words, default_system_prompt=default_system_prompt,
        locale=locale, resources=str(resources) if resources else None,
        simulator_questions=parse_names(simulator_questions), simulator_judge=parse_spec(simulator_judge) if simulator_judge else None,
        drift=drift, engagement=engagement, options=replace(options, max_retries=retries),
        vera_config={**replay.provenance, "checkout": replay.checkout} if replay else None,
        notes=[f"VERA-MH run config: not honoured: {x}" for x in replay.not_honoured] if replay else [])
    _go(_with_judge_from(cfg, judge_from))


def _vera_replay(path: Path, rubric: str | None, **given):
    """``--vera-config``: the config read, after refusing the flags it sets (a VERA-MH run is
    defined by its config or by flags, never both), each unhonoured setting echoed."""
    from carebench.converse.vera_config import read_vera_config

    if rubric is not None and not rubric.startswith("vera:"):
        raise CarebenchError("--vera-config: --rubric may only give the VERA-MH checkout (vera:PATH); the config "
                             "names the target")
    defaults = {"turn_unit": None, "provider_speaks_first": False, "turns": None, "sessions": None,
                "max_total_words": None, "repeats": 1, "simulator": None, "chatbot": None}
    clash = next((k for k, v in given.items() if k in defaults and v != defaults[k]), None)
    if clash is not None:
        raise CarebenchError(f"--vera-config sets the run: leave out --{clash.replace('_', '-')}")
    replay = read_vera_config(path, rubric)
    if replay.judges and given.get("judge"):
        raise CarebenchError("--vera-config names the judges (judging.models): leave out --judge")
    replay.checkout = rubric
    for line in replay.not_honoured:
        typer.echo(f"--vera-config: not honoured: {line}", err=True)
    return replay


@app.command("judge")
@run_flags()
def judge_cmd(
    run_dir: Annotated[Path | None, typer.Argument(
        show_default="none: give it or --transcripts", help="A converse run directory whose conversations to judge.")] = None,
    rubric: Rubric = None, judge: Judge = None, rubric_rules: RubricRules = None, judge_from: JudgeFrom = None,
    transcripts: Annotated[Path | None, typer.Option(
        show_default="none", help="Judge conversations from elsewhere instead: a JSONL file ({id, persona, "
        "risk_level, locale, messages: [{role, content}]} a line) or VERA-MH conversation .txt files (a "
        "directory).")] = None,
    chatbot: Annotated[str | None, typer.Option(
        show_default="a row's own 'chatbot', VERA-MH's run folder name, else 'transcripts'",
        help="With --transcripts: the name of the system that wrote the replies.")] = None,
    personas: Annotated[str | None, typer.Option(
        show_default="none: risk levels from the rows, else unknown",
        help="With --transcripts: a persona file whose risk levels are joined by persona id or name.")] = None,
    judge_system: Annotated[Path | None, typer.Option(show_default="the built-in prompt, or the bundle's", help="Judge system prompt file.")] = None,
    judge_question: Annotated[Path | None, typer.Option(show_default="the built-in template, or the bundle's", help="Judge question template file.")] = None,
    judge_prompts: JudgePrompts = "target",
    judge_max_tokens: Annotated[int, typer.Option(help="Judge output cap (tokens).")] = 400,
    judge_mode: Annotated[str, typer.Option(
        help="question (one call per rubric question, default) or dimension (one call per dimension).")] = "question",
    simulator_questions: SimulatorQuestions = None, simulator_judge: SimulatorJudge = None,
    drift: Drift = None, engagement: EngagementOption = "prefilter",
    seed: Seed = 12345, bootstrap: Bootstrap = 2000,
    options: RunOptions = RUN_FLAGS,
    locale: LocaleOption = None, resources: ResourcesOption = None,
) -> None:
    """Walk the rubric over an earlier run's conversations (other judges or rubric), or over
    conversations from elsewhere (--transcripts), in a new directory."""
    from carebench.converse.simulator_questions import parse_names
    from carebench.converse.suite import ConverseConfig

    if (run_dir is None) == (transcripts is None):
        raise CarebenchError("converse judge: give a run directory or --transcripts PATH (one of them)")
    if transcripts is None and (chatbot or personas):
        raise CarebenchError("converse judge: --chatbot and --personas go with --transcripts")
    cfg = ConverseConfig(rubric=rubric, rubric_rules=rubric_rules, judges=parse_specs(judge),
                         from_run=str(run_dir) if run_dir is not None else None,
                         transcripts=str(transcripts) if transcripts is not None else None,
                         transcripts_chatbot=chatbot, personas=personas,
                         judge_system=str(judge_system) if judge_system else None,
                         judge_question=str(judge_question) if judge_question else None,
                         judge_prompts=judge_prompts,
                         judge_max_tokens=judge_max_tokens, judge_mode=judge_mode, seed=seed,
                         bootstrap=bootstrap, locale=locale, resources=str(resources) if resources else None,
                         simulator_questions=parse_names(simulator_questions), simulator_judge=parse_spec(simulator_judge) if simulator_judge else None,
                         drift=drift, engagement=engagement, options=options)
    _go(_with_judge_from(cfg, judge_from))


@app.command("calibrate")
@run_flags(without=("batch", "batch_format"))
def calibrate_cmd(
    labels: Annotated[Path, typer.Option(help="Clinicians' rubric walks: the JSONL of 'carebench annotate export' "
                                         "(rubric-walk kind).")],
    run_dir: Annotated[Path | None, typer.Option(
        "--run", show_default="none: give it or --transcripts", help="The converse run whose conversations the "
        "clinicians walked.")] = None,
    transcripts: Annotated[Path | None, typer.Option(
        show_default="none", help="Or the conversations from elsewhere (as 'converse judge --transcripts').")] = None,
    candidate: Annotated[list[str] | None, typer.Option(
        show_default="none: give at least one", help="Candidate judge model spec (repeatable).")] = None,
    rubric: Rubric = None, rubric_rules: RubricRules = None,
    consensus: Annotated[str, typer.Option(
        help="The clinicians' consensus per dimension: majority (more than half agree; else excluded) or "
             "unanimous.")] = "majority",
    select_metric: Annotated[str, typer.Option(
        help="Selection: the coefficient averaged over dimensions against the consensus: ac1, kappa or raw.")] = "ac1",
    floor: Annotated[float, typer.Option(
        help="Selection: a judge's mean coefficient on every chatbot's conversations must reach this.")] = 0.4,
    judge_system: Annotated[Path | None, typer.Option(show_default="the built-in prompt, or the bundle's", help="Judge system prompt file.")] = None,
    judge_question: Annotated[Path | None, typer.Option(show_default="the built-in template, or the bundle's", help="Judge question template file.")] = None,
    judge_prompts: JudgePrompts = "target",
    judge_max_tokens: Annotated[int, typer.Option(help="Judge output cap (tokens).")] = 400,
    judge_mode: Annotated[str, typer.Option(
        help="question (one call per rubric question, default) or dimension (one call per dimension).")] = "question",
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 12345,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples (conversations resampled).")] = 2000,
    options: RunOptions = RUN_FLAGS,
) -> None:
    """Have each candidate judge walk the conversations clinicians walked, measure its agreement
    with them, and select one judge by a stated rule (docs/converse.md, "Calibrating the judge")."""
    from carebench.converse.calibration import Rule
    from carebench.converse.calibration_run import SELECTION, run_calibration
    from carebench.converse.suite import ConverseConfig
    from carebench.engine.skeleton import echo_plan

    if (run_dir is None) == (transcripts is None):
        raise CarebenchError("converse calibrate: give --run RUN_DIR or --transcripts PATH (one of them)")
    if not candidate:
        raise CarebenchError("converse calibrate: give at least one --candidate")
    cfg = ConverseConfig(rubric=rubric, rubric_rules=rubric_rules, judges=parse_specs(candidate),
                         from_run=str(run_dir) if run_dir is not None else None,
                         transcripts=str(transcripts) if transcripts is not None else None,
                         judge_system=str(judge_system) if judge_system else None,
                         judge_question=str(judge_question) if judge_question else None,
                         judge_prompts=judge_prompts,
                         judge_max_tokens=judge_max_tokens, judge_mode=judge_mode, seed=seed,
                         bootstrap=bootstrap, options=options)
    res = run_calibration(cfg, str(labels), Rule(metric=select_metric, floor=floor, consensus=consensus))
    if options.dry_run:
        echo_plan(res)  # type: ignore[arg-type]
        return
    from carebench.engine.rundir import read_json

    sel = read_json(Path(res) / SELECTION)  # type: ignore[arg-type]
    typer.echo(f"wrote {Path(res) / 'report.html'} and {Path(res) / SELECTION}: selected "  # type: ignore[arg-type]
               f"{sel['judge'] or 'no judge (none passes the rule)'}")


@app.command()
@run_flags(only=("out",))
def score(
    run_dir: Annotated[Path, typer.Argument(help="A converse run directory.")],
    judge: Annotated[list[str] | None, typer.Option(show_default='every judge of the run', help="Score only these judges' walks (repeatable).")] = None,
    seed: Annotated[int | None, typer.Option(show_default="the run's", help="Bootstrap seed.")] = None,
    bootstrap: Annotated[int | None, typer.Option(min=1, show_default="the run's", help="Bootstrap resamples.")] = None,
    options: RunOptions = RUN_FLAGS,
    resources: Annotated[Path | None, typer.Option(
        "--resources", show_default="the checks the run recorded",
        help="Re-check the recorded conversations against this crisis-resource registry (no model call; "
             "needs --out).")] = None,
    locale: LocaleOption = None,
    drift: Annotated[str | None, typer.Option(
        "--drift", metavar="RUBRIC", show_default="the rubric the run rated with",
        help="Re-score the run's drift ratings with this drift rubric's cap, weights, slope and withdrawal "
             "settings (no model call; its behaviours must be ones the run rated, defined as they were).")] = None,
) -> None:
    """Score a run from its records (optionally a subset of judges) into --out (default: in place)."""
    _rescore(run_dir, judge, seed, bootstrap, options.out, resources, locale, drift)


@app.command()
def rescore(run_dir: Annotated[Path, typer.Argument(help="A converse run directory.")]) -> None:
    """Recompute metrics.json, scores.csv and the report from the records, with the run's settings."""
    _rescore(run_dir, None, None, None, None)


def _rescore(run_dir: Path, judges, seed, bootstrap, out, resources=None, locale=None, drift=None) -> None:
    from carebench.converse.suite import SUITE, ConverseSuite
    from carebench.engine.rundir import read_json
    from carebench.engine.skeleton import rerender

    manifest = read_json(Path(run_dir) / "manifest.json")
    if manifest.get("suite") != SUITE:
        raise CarebenchError(f"{run_dir} is a {manifest.get('suite')!r} run, not a converse run")
    if manifest.get("kind") == "calibration":
        raise CarebenchError(f"{run_dir} is a converse calibration run, not a run of chatbots: "
                             f"'carebench report {run_dir}' re-renders it")
    settings = dict(manifest.get("scoring") or {})
    if judges:
        from carebench.engine.rundir import read_jsonl

        recs = read_jsonl(Path(run_dir) / "records.jsonl")
        recorded = sorted({r["judge"] for r in recs if r.get("kind") == "walk"}
                          | {v["judge"] for r in recs if r.get("kind") == "criteria" for v in r["votes"]})
        unknown = [j for j in judges if j not in recorded]
        if unknown:
            raise CarebenchError(f"{run_dir}: no walks by judge {unknown[0]!r}; recorded: {', '.join(recorded)}")
        settings["judges"] = list(judges)
    if seed is not None:
        settings["seed"] = seed
    if bootstrap is not None:
        settings["bootstrap"] = bootstrap
    if drift is not None:
        from carebench.converse.drift import rescoring_rubric

        settings["drift"] = rescoring_rubric(drift, settings.get("drift"), run_dir)
    manifest = {**manifest, "scoring": settings}
    # where the chatbot sent people, against another registry
    recheck, block = recheck_against(resources, locale, manifest, run_dir, out, "conversations")
    if block is not None:
        manifest["resources"] = block
    target = Path(out) if out else Path(run_dir)
    metrics = rerender(run_dir, ConverseSuite(recheck=recheck), out_dir=target, manifest=manifest)
    if metrics.get("status") == "incomplete":
        typer.echo(f"wrote {target / 'report.html'} (the run is incomplete: nothing is scored)")
    else:
        typer.echo(f"wrote {target / 'scores.csv'} and {target / 'report.html'}")


@app.command("import-vera")
@run_flags(only=("out",), no_cache=True, progress=False)
def import_vera(
    results: Annotated[list[Path], typer.Argument(help="VERA-MH results.csv / results-pool.csv files (pooled).")],
    chatbot: Annotated[str, typer.Option(help="Name for the evaluated chatbot in the report.")] = "imported",
    personas: Annotated[Path | None, typer.Option(
        show_default="none: the results' risk_level column, else unknown",
        help="Personas table (VERA-MH's personas.tsv) giving each persona's risk level, when the results "
             "have no risk_level column.")] = None,
    dimensions: Annotated[list[str] | None, typer.Option(
        "--dimensions", show_default="the --rubric's dimensions, else the columns with _yes_question_id",
        help="A dimension column (repeatable); the other columns are annotations.")] = None,
    rubric: Annotated[str | None, typer.Option(
        show_default="none: dimensions from --dimensions or the columns",
        help="The rubric the results were judged with: its dimensions are the rated columns.")] = None,
    seed: Seed = 12345, bootstrap: Bootstrap = 2000, options: RunOptions = RUN_FLAGS,
) -> None:
    """Score VERA-MH results files with persona-resampling intervals (no model calls)."""
    from carebench.converse.suite import ImportSuite
    from carebench.engine.skeleton import run_suite

    res = run_suite(ImportSuite([str(p) for p in results], chatbot, seed, bootstrap,
                                str(personas) if personas else None, dimensions, rubric),
                    options, out=options.out)
    typer.echo(f"wrote {Path(res) / 'scores.csv'} and {Path(res) / 'report.html'}")  # type: ignore[arg-type]
