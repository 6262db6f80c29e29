"""The ``carebench`` command: one Typer app, ``carebench <suite> <verb>``.

User-caused errors (``CarebenchError``) end with one clear line and exit code 2,
never a traceback; an interrupt says what was kept (the cache holds every
completed call, so re-running resumes).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated

import typer

import carebench
from carebench import suites as suite_table
from carebench.cli_params import Slot, expand
from carebench.types import BatchPending, CarebenchError, ChatRequest, RunStopped, messages

app = typer.Typer(
    name="carebench",
    help="Measure how AI systems recognize and respond to suicide and self-harm risk.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help is shown exactly as written: Rich markup swallowed "[mlflow]" in
    # "pip install 'carebench[mlflow]'" (every sub-app inherits the root's mode)
    rich_markup_mode=None,
)
models_app = typer.Typer(help="Model providers.", no_args_is_help=True)
app.add_typer(models_app, name="models")

def _version_text() -> str:
    """carebench's version and, when llama-cpp-python is installed, its version (no model is loaded)."""
    lines = [f"carebench {carebench.__version__}"]
    if importlib.util.find_spec("llama_cpp") is None:
        lines.append("llama.cpp runtime: not installed (pip install 'carebench[llm]' for llamacpp: models)")
    else:
        try:
            version = metadata.version("llama-cpp-python")
        except metadata.PackageNotFoundError:
            version = "unknown version"
        lines.append(f"llama.cpp runtime: llama-cpp-python {version}")
    return "\n".join(lines)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(_version_text())
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_show_version,
        help="Print carebench's version and the llama.cpp runtime's, if installed, and exit.")] = False) -> None:
    """Measure how AI systems recognize and respond to suicide and self-harm risk."""


def _help_when_no_args(cmd) -> None:
    """Every command that needs an argument or option prints its help when given none
    (a group already does through ``no_args_is_help``)."""
    for sub in getattr(cmd, "commands", {}).values():
        _help_when_no_args(sub)
    if not hasattr(cmd, "commands") and any(p.required for p in cmd.params):
        cmd.no_args_is_help = True


_MOUNTED: set[str] = set()
#: top-level commands that read run directories through the suite table, not a suite's app
_OWN_COMMANDS = frozenset({"compare", "leaderboard", "view"})


def _mount_suites(only: str | None = None) -> None:
    """Add the suites' and tools' sub-apps, each once (``main`` may run many times in one process).

    With ``only`` naming a suite or tool, just that one is imported: a command such as
    ``carebench support rescore`` then does not pay for importing every other suite
    (about a second: risk alone pulls in SciPy's statistics and the sweep).
    """
    apps = {name: entry.app for name, entry in suite_table.SUITES.items()} | dict(suite_table.TOOLS)
    if only in _OWN_COMMANDS:  # a command of this app that needs no suite's commands
        return
    names = [only] if only in apps else list(apps)
    for name in names:
        if name not in _MOUNTED:
            _MOUNTED.add(name)
            app.add_typer(apps[name](), name=name)


def _command_name(argv: list[str]) -> str | None:
    """The first word of the command line that is not an option (the suite, for suite commands)."""
    return next((a for a in argv if not a.startswith("-")), None)


@app.command()
def demo(
    out: Annotated[Path | None, typer.Option(show_default='runs/demo-<time>', help="Run directory.")] = None,
    model: Annotated[str, typer.Option(help="Model spec for the model-backed parts.")] = "llamacpp:builtin",
    full: Annotated[bool, typer.Option(help="Run every built-in item (slower).")] = False,
    cache: Annotated[Path | None, typer.Option(show_default='CAREBENCH_CACHE, else the user cache directory', help="Cache file.")] = None,
    jobs: Annotated[int | None, typer.Option(
        show_default="2 when more than one core is usable and free (usable cores minus the 1-minute load "
                     "average), else 1",
        help="Worker processes for the suite parts (1: one after another).", min=1)] = None,
) -> None:
    """Run carebench offline on built-in data and write a run directory."""
    from carebench.demo import run_demo

    run_demo(out=out, model_spec=model, quick=not full, cache_path=cache, jobs=jobs)


@models_app.command("check")
def models_check(
    spec: Annotated[str, typer.Argument(help="Model spec, e.g. openai:gpt-4o-mini")],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 60.0,
) -> None:
    """Send one tiny request; print ok, latency and the model's answer."""
    from carebench.engine.options import run_options
    from carebench.engine.run import Run
    from carebench.engine.runner import Call

    req = ChatRequest(messages(("user", "Reply with the single word: ready")), max_tokens=16)
    # one try and one retry, never from the cache: the point is to reach the model now
    with Run(run_options(no_cache=True, timeout=timeout, progress=False, retries=1)) as run:
        model = run.model(spec)
        res = run.calls([Call(model, req)], "models check", stage="models check")
    comp = res.completions[0]
    if comp is None or comp.error is not None:
        raise CarebenchError(f"{spec}: {comp.error if comp else 'no answer'}")
    answer = comp.extra.get("scores") or comp.text.strip()
    typer.echo(f"ok  {spec}  latency {comp.latency_s:.2f} s  status {comp.status}  answer: {answer!r}")
    if model.spec.provider == "llamacpp":
        from carebench.models.llamacpp import runtime_info

        typer.echo(f"    runtime: {runtime_info()}")


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="A carebench run directory.")]) -> None:
    """Re-render a run directory's metrics and reports from its records alone."""
    from carebench.engine.rundir import read_manifest

    if read_manifest(run_dir).get("suite") == "demo":
        from carebench.demo import rerender as rerender_demo

        rerender_demo(run_dir)
    else:
        suite_table.rerender(run_dir)
    typer.echo(f"re-rendered {run_dir}/report.md and report.html")


#: ``carebench compare``'s pairing options, one per option named in the suite table
_PAIRS = Slot("PAIRS")


def _pair_options(func):
    """Give ``compare`` the suite table's pairing options in place of its ``pairs`` parameter."""
    options = {option.lstrip("-").replace("-", "_"): (Annotated[list[str] | None, typer.Option(
        option, show_default="every name in both runs, else the only one of each", help=help_)], None)
        for option, help_ in suite_table.pair_options().items()}
    return expand(func, options, {_PAIRS: lambda values: {
        f"--{name.replace('_', '-')}": given for name, given in values.items()}})


@app.command()
@_pair_options
def compare(
    base: Annotated[Path, typer.Argument(help="The base run directory (e.g. what is deployed).")],
    candidate: Annotated[Path, typer.Argument(help="The candidate run directory.")],
    out: Annotated[Path | None, typer.Option(show_default='runs/compare-<time>', help="Output directory.")] = None,
    gate: Annotated[list[str] | None, typer.Option(
        show_default=suite_table.default_gates_text(), help="METRIC[:MARGIN] deciding the exit code (repeatable; globs such as 'full:*'). "
             "full:* is every profile.")] = None,
    margin: Annotated[float, typer.Option(help="Verdict margin: regression when the whole 95% interval is "
                                               "worse than -margin.")] = 0.0,
    allow_different: Annotated[list[str] | None, typer.Option(
        "--allow-different", show_default='none: every check applies', help="Override one comparability check on purpose (repeatable; named in the "
                                  "report).")] = None,
    pairs: dict = _PAIRS,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples of the shared units.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 12345,
    junit: Annotated[Path | None, typer.Option(show_default='none', help="Write JUnit XML: one test case per gated metric.")] = None,
    summary: Annotated[Path | None, typer.Option(show_default='none', help="Write a short markdown summary (pull-request "
                                                      "comment).")] = None,
) -> None:
    """Compare a candidate run with a base run of the same suite; exit 1 if a gated metric regresses."""
    from carebench.compare.command import CompareConfig, pairs_from_options, run_compare

    cfg = CompareConfig(str(base), str(candidate), out=None if out is None else str(out),
                        pairs=pairs_from_options(pairs),
                        gates=list(gate or []), margin=margin, allow_different=list(allow_different or []),
                        B=bootstrap, seed=seed, junit=None if junit is None else str(junit),
                        summary=None if summary is None else str(summary))
    out_dir, metrics = run_compare(cfg, suite_table.comparer)
    failed = metrics["gate"]["failed"]
    n_gated = sum(r["gated"] for p in metrics["pairs"] for r in p["rows"])
    typer.echo(f"{'FAIL' if failed else 'pass'}: {len(failed)} of {n_gated} gated metric(s) regressed; "
               f"report in {out_dir}/report.html")
    for f in failed:
        typer.echo(f"  regression: {f['label']} ({f['pair']}) {f['diff']:+.4f}")
    if failed:
        raise typer.Exit(1)


@app.command()
def leaderboard(
    runs: Annotated[list[Path], typer.Argument(help="Run directories of one suite (the first is the reference "
                                                    "for comparability).")],
    out: Annotated[Path | None, typer.Option(show_default='runs/leaderboard-<time>', help="Output directory.")] = None,
    prefer: Annotated[str | None, typer.Option(show_default='none: a system in several runs is an error', help="newest|oldest: which run supplies a system found in "
                                                    "several runs (never averaged).")] = None,
    allow_different: Annotated[list[str] | None, typer.Option(
        "--allow-different", show_default='none: every check applies', help="Override one comparability check on purpose (repeatable).")] = None,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples of the shared units.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 12345,
) -> None:
    """Merge runs of one suite made at different times into one leaderboard with bands."""
    from carebench.compare.leaderboard import LeaderboardConfig, run_leaderboard

    cfg = LeaderboardConfig([str(r) for r in runs], out=None if out is None else str(out), prefer=prefer,
                            allow_different=list(allow_different or []), B=bootstrap, seed=seed)
    out_dir, metrics = run_leaderboard(cfg, suite_table.comparer)
    excluded = [r for r in metrics["runs"] if not r["included"]]
    typer.echo(f"leaderboard of {len(metrics['runs']) - len(excluded)} run(s) in {out_dir}/report.html"
               + (f"; {len(excluded)} excluded" if excluded else ""))
    for r in excluded:
        typer.echo(f"  excluded {r['path']}: {r['reason']}")


@app.command()
def view(
    folders: Annotated[list[Path] | None, typer.Argument(
        show_default="runs", help="Folders holding run directories (searched up to 4 levels down).")] = None,
    out: Annotated[Path | None, typer.Option(show_default="FIRST_FOLDER/view, or FIRST_FOLDER-view beside a run directory",
                                             help="Folder for the page (index.html).")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 (needs carebench[annotate]).")] = False,
    port: Annotated[int, typer.Option(help="Port for --serve (0: any free port).")] = 8000,
    leaderboards: Annotated[bool, typer.Option(help="Merge comparable runs of each suite into leaderboards.")] = True,
    bootstrap: Annotated[int, typer.Option(min=1, help="Bootstrap resamples of the leaderboards.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 12345,
) -> None:
    """One page across every run directory: runs table, leaderboards, search over texts."""
    from carebench.view import ViewConfig, build_view

    cfg = ViewConfig([str(f) for f in folders or [Path("runs")]], out=None if out is None else str(out),
                     leaderboards=leaderboards, B=bootstrap, seed=seed)
    res = build_view(cfg, suite_table.comparer)
    typer.echo(f"view of {len(res.runs)} run(s): {res.index.with_name('index.html')}")
    if serve:
        from carebench.view.serve import serve as serve_view

        serve_view(res.index, [r.path for r in res.runs] or [Path(cfg.folders[0])], port)


def _click_classes(name: str) -> tuple[type[BaseException], ...]:
    """Click's exception class ``name``, wherever this Typer keeps it.

    Recent Typer vendors Click as ``typer._click`` (and no longer installs ``click``);
    older Typer uses the ``click`` package. Catching only one of them let the other's
    ``NoSuchOption`` escape as a traceback.
    """
    found = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _show_usage_error(e: BaseException) -> None:
    """The command's usage line and one ``carebench: error:`` line (no traceback, no box)."""
    ctx = getattr(e, "ctx", None)
    hint = ""
    if ctx is not None:
        print(ctx.get_usage().splitlines()[0], file=sys.stderr)
        hint = f" (see '{ctx.command_path} --help')"
    msg = e.format_message() if hasattr(e, "format_message") else str(e)
    print(f"carebench: error: {' '.join(msg.split())}{hint}", file=sys.stderr)


INTERRUPTED = "carebench: interrupted; completed model calls are cached, re-run to resume"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user mistakes end in at most a usage line and one error line, exit 2."""
    from carebench.batch import options as batch_options

    batch_options.COMMAND_LINE = list(sys.argv[1:] if argv is None else argv)
    _mount_suites(_command_name(batch_options.COMMAND_LINE))
    try:
        command = typer.main.get_command(app)
        _help_when_no_args(command)
        rc = command.main(args=argv, prog_name="carebench", standalone_mode=False)
    except BatchPending as e:  # before RunStopped: batch mode wrote what the run waits for
        print(f"carebench: {e}", file=sys.stderr)
        return 4
    except RunStopped as e:  # before CarebenchError: a suite's stop may be both
        print(f"carebench: {e}", file=sys.stderr)
        return 3
    except CarebenchError as e:
        print(f"carebench: error: {e}", file=sys.stderr)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except (typer.Abort, KeyboardInterrupt, *_click_classes("Abort")):
        print(INTERRUPTED, file=sys.stderr)
        return 130
    except _click_classes("ClickException") as e:
        exit_code = getattr(e, "exit_code", 2)
        if type(e).__name__ == "Exit":  # Click's own Exit in older Typer
            return exit_code
        if type(e).__name__ == "NoArgsIsHelpError":
            # a bare group lists its commands (stdout, exit 0); a command given none of the inputs it
            # needs shows its help on stderr and exits 2: a CI step with empty variables never passes
            if hasattr(getattr(e, "ctx", None) and e.ctx.command, "commands"):
                print(e.format_message())
                return 0
            print(e.format_message(), file=sys.stderr)
            return 2
        _show_usage_error(e)
        return 2
    if rc == 130:  # Typer turns Ctrl-C into Exit(130), returned in non-standalone mode
        print(INTERRUPTED, file=sys.stderr)
    return rc if isinstance(rc, int) else 0


def entrypoint() -> None:
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entrypoint()
