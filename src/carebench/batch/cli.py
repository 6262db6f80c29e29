"""``carebench batch import|submit|status|fetch|run``: the batch directory's commands.

Nothing is submitted to a provider except by ``submit`` or ``run``; keys come from
the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY) and are never written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Batch mode: import results, submit request files, run round by round.",
                  no_args_is_help=True)

CacheOpt = Annotated[Path | None, typer.Option(
    "--cache", show_default="CAREBENCH_CACHE, else the user cache directory", help="Cache file to import into.")]


def _cache(path: Path | None):
    from carebench.engine.cache import CompletionCache

    return CompletionCache(path)


@app.command("import")
def import_cmd(
    result_files: Annotated[list[Path], typer.Argument(help="Result files: OpenAI output/error files, "
                                                            "Anthropic results, vLLM run_batch output.")],
    dir: Annotated[Path | None, typer.Option("--dir", show_default='the nearest parent of the files holding a manifest', help="The batch directory .")] = None,
    cache: CacheOpt = None,
) -> None:
    """Load batch results into the cache, matched by custom_id; re-run the command to go on."""
    from carebench.batch.import_ import find_batch_dir, import_results

    d = dir if dir is not None else find_batch_dir(result_files)
    counts = import_results(d, list(result_files), _cache(cache))
    typer.echo(counts.line())


@app.command("submit")
def submit_cmd(dir: Annotated[Path, typer.Argument(help="The batch directory.")]) -> None:
    """Submit every request file not yet submitted (OpenAI Batch API, Anthropic Message Batches)."""
    from carebench.batch.submit import submit

    typer.echo(submit(dir))


@app.command("status")
def status_cmd(dir: Annotated[Path, typer.Argument(help="The batch directory.")]) -> None:
    """Ask the providers how far each submitted batch is."""
    from carebench.batch.submit import status

    typer.echo(status(dir).line())


@app.command("fetch")
def fetch_cmd(
    dir: Annotated[Path, typer.Argument(help="The batch directory.")],
    cache: CacheOpt = None,
) -> None:
    """Download the results of finished batches into DIR/results and import them."""
    from carebench.batch.submit import fetch

    typer.echo(fetch(dir, _cache(cache)))


@app.command("run", context_settings={"allow_extra_args": True})
def run_cmd(
    ctx: typer.Context,
    dir: Annotated[Path, typer.Option("--dir", help="The batch directory.")],
    poll: Annotated[float, typer.Option(help="First wait between status checks, seconds (backs off).")] = 30.0,
    max_poll: Annotated[float, typer.Option(help="Longest wait between status checks, seconds.")] = 600.0,
    batch_format: Annotated[str | None, typer.Option("--batch-format", show_default='openai', help="openai or vllm (see "
                                                                              "carebench run --help).")] = None,
) -> None:
    """Loop: the command, submit, wait, fetch and import, the command ... until it finishes.

    Give the carebench command after ``--``: carebench batch run --dir DIR -- support run ...
    Killed at any point, the same invocation resumes where it stopped."""
    from carebench.batch.loop import run_loop

    args = list(ctx.args)
    if args and args[0] == "--":
        args = args[1:]
    if args and args[0] == "carebench":
        args = args[1:]
    raise typer.Exit(run_loop(dir, args, poll_s=poll, max_poll_s=max_poll, batch_format=batch_format))
