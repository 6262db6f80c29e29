"""``carebench export inspect`` and ``carebench import inspect``: run directories to and from Inspect logs.

Inspect is imported only inside the commands; without the extra each says, in one line,
to install ``carebench[inspect]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

export_app = typer.Typer(help="Write carebench run directories in other tools' formats.", no_args_is_help=True)
import_app = typer.Typer(help="Read other tools' logs as carebench inputs.", no_args_is_help=True)


@export_app.command("inspect")
def export_inspect(
    run_dir: Annotated[Path, typer.Argument(help="A carebench run directory, or a demo's (one log per part).")],
    out: Annotated[Path | None, typer.Option(
        show_default="RUN_DIR.eval beside the run; for a demo, the folder RUN_DIR-inspect",
        help="The .eval file to write; for a demo's run directory, a folder for one PART.eval per part.")] = None,
) -> None:
    """Write a run directory as an Inspect log (.eval) that inspect view shows and read_eval_log reads."""
    from carebench.engine.rundir import read_json, read_manifest
    from carebench.inspect.require import require_inspect

    require_inspect()
    from carebench.inspect.log import write_log

    run_dir = run_dir.resolve() if run_dir.exists() else run_dir
    manifest = read_manifest(run_dir)
    if manifest.get("suite") == "demo":
        folder = out or run_dir.with_name(f"{run_dir.name}-inspect")
        parts = list((read_json(run_dir / "metrics.json") or {}).get("parts") or [])
        for part in parts:
            written = write_log(run_dir / part, folder / f"{part}.eval")
            typer.echo(f"wrote {written}")
        return
    written = write_log(run_dir, out or run_dir.with_name(f"{run_dir.name}.eval"))
    typer.echo(f"wrote {written}")


@import_app.command("inspect")
def import_inspect(
    log: Annotated[Path, typer.Argument(help="An Inspect log (.eval or .json) of a chat evaluation.")],
    out: Annotated[Path | None, typer.Option(show_default="LOG with .transcripts.jsonl",
                                             help="The transcripts file (JSONL) to write.")] = None,
) -> None:
    """Turn an Inspect log's conversations into transcripts for converse judge --transcripts."""
    from carebench.inspect.require import require_inspect

    require_inspect()
    from carebench.inspect.transcripts import write_transcripts

    out = out or log.with_name(f"{log.stem}.transcripts.jsonl")
    got = write_transcripts(log, out)
    typer.echo(f"wrote {len(got.rows)} transcript(s) to {out}"
               + (f"; {len(got.skipped)} sample(s) left out" if got.skipped else ""))
    for why in got.skipped:
        typer.echo(f"  left out {why}")
    typer.echo(f"judge them with: carebench converse judge --transcripts {out} --judge SPEC")
