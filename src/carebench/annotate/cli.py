"""``carebench annotate``: the web interface people use to label what the suites
hand them (practitioner policies, blind rewrite reviews, clinician criterion
labels), and the commands that load sheets, issue links and export labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from carebench.types import CarebenchError

app = typer.Typer(
    help="Web interface for practitioner policies, rewrite reviews, criterion labels and rubric walks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DbOpt = Annotated[str, typer.Option(help="SQLite file, or any SQLAlchemy URL (e.g. postgresql://...).")]


def _store(db: str, create: bool = False):
    try:
        from carebench.annotate.store import Store
    except ImportError as e:
        raise CarebenchError(f"carebench annotate needs the 'annotate' extra ({e.name} is missing): "
                             "pip install 'carebench[annotate]'") from None
    return Store(db, create=create)


@app.command()
def serve(
    db: DbOpt,
    host: Annotated[str, typer.Option(help="Address to listen on; loopback unless you say otherwise.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one).")] = 8000,
    settings: Annotated[Path | None, typer.Option(
        show_default='the built-in texts and limits', help="YAML overriding texts and limits: content_notice, session_cases, support, instructions...")] = None,
    taxonomy: Annotated[Path | None, typer.Option(
        show_default='the packaged VEILED-SH taxonomy', help="Taxonomy YAML for policy mode.")] = None,
    contexts: Annotated[Path | None, typer.Option(
        show_default='the packaged four', help="Contexts YAML with interaction contracts.")] = None,
) -> None:
    """Serve the annotation pages until interrupted."""
    _store(db).close()  # clear error for a missing extra or database before binding
    from carebench.annotate.server import serve as run

    run(db, host=host, port=port, settings_path=settings, taxonomy_path=taxonomy, contexts_path=contexts)


@app.command()
def load(
    db: DbOpt,
    project: Annotated[Path | None, typer.Option(show_default="needed unless --run", help="A sheet: policy cases, review items or criterion items "
                                                      "(.jsonl, .csv or .parquet), or builtin:calibration-cases "
                                                      "(the built-in plural calibration cases).")] = None,
    name: Annotated[str | None, typer.Option(show_default="the file's stem", help="Project name.")] = None,
    kind: Annotated[str | None, typer.Option(show_default='detect', help="policy, review, criterion or "
                                                                         "rubric-walk.")] = None,
    run: Annotated[Path | None, typer.Option(show_default="needed for rubric-walk unless --transcripts",
                                             help="rubric-walk: a converse run directory whose finished "
                                                  "conversations clinicians walk the rubric over.")] = None,
    transcripts: Annotated[Path | None, typer.Option(
        show_default="none: rubric walks need it or --run",
        help="rubric-walk: conversations carebench did not generate, in the formats 'converse judge "
             "--transcripts' reads (JSONL rows of {id, persona?, risk_level?, locale?, chatbot?, messages}, "
             "or VERA-MH conversation .txt files or a directory of them).")] = None,
    rubric: Annotated[str | None, typer.Option(show_default="needed with --run or --transcripts", help="rubric-walk: the rubric (VERA-MH TSV, YAML, bundle "
                                                    "directory or builtin:sample).")] = None,
    rules: Annotated[str | None, typer.Option(show_default="the rubric's own",
                                              help="rubric-walk: walk rules (vera, carebench, vera+OPTION).")] = None,
    overlap: Annotated[int, typer.Option(help="rubric-walk: clinicians per conversation.")] = 2,
) -> None:
    """Load a sheet (or conversations to walk the rubric over: a converse run's, or
    transcripts from elsewhere) as a project and assign it to the eligible annotators."""
    store = _store(db, create=True)
    from carebench.annotate.kinds import builtin_sheet, detect_kind, load_sheet
    from carebench.datasets.builtin import builtin_name

    if run is not None or transcripts is not None or kind == "rubric-walk":
        from carebench.annotate.walks import KIND, load_run, load_transcripts

        if kind not in (None, KIND) or project is not None:
            raise CarebenchError("--run and --transcripts load a rubric walk: give one of them with "
                                 "--rubric FILE, without --project")
        if (run is None) == (transcripts is None) or rubric is None:
            raise CarebenchError("--kind rubric-walk needs --run RUN_DIR or --transcripts PATH (one of them) "
                                 "and --rubric FILE")
        if run is not None:
            kind, rows, stem, source = KIND, load_run(run, rubric, rules, overlap), run.name, str(run)
        else:
            assert transcripts is not None
            rows = load_transcripts(transcripts, rubric, rules, overlap)
            kind, stem, source = KIND, transcripts.stem, str(transcripts)
    elif project is None:
        raise CarebenchError("give --project SHEET (or --kind rubric-walk --run RUN_DIR or --transcripts PATH, "
                             "with --rubric FILE)")
    elif (builtin := builtin_name(str(project))) is not None:
        sheet_kind, rows = builtin_sheet(builtin)
        if kind is not None and kind != sheet_kind:
            raise CarebenchError(f"--project builtin:{builtin} is a {sheet_kind} sheet, not --kind {kind}")
        kind, stem, source = sheet_kind, builtin, str(project)
    else:
        if not project.is_file():
            raise CarebenchError(f"--project {project}: no such file")
        kind = kind or detect_kind(project)
        rows, stem, source = load_sheet(project, kind), project.stem, str(project)
    if not rows:
        raise CarebenchError(f"{source}: the sheet is empty")
    n_items, n_assigned = store.add_project(name or stem, kind, rows, source=source)
    typer.echo(f"loaded {n_items} {kind} items as project {name or stem!r}; "
               f"{n_assigned} assignments to existing annotators")


@app.command("add-annotator")
def add_annotator(
    db: DbOpt,
    name: Annotated[str, typer.Option(help="The annotator's name or alias (review sheets name reviewers).")],
    role: Annotated[str, typer.Option(help="peer or clinician (policies; clinicians also label "
                                           "criteria) or reviewer (rewrite reviews).")],
    base_url: Annotated[str, typer.Option(help="Address the annotator will reach the server at.")] =
        "http://127.0.0.1:8000",
) -> None:
    """Create an annotator and print their personal sign-in link (shown once)."""
    store = _store(db, create=True)
    token, n = store.add_annotator(name, role)
    typer.echo(f"{base_url.rstrip('/')}/login/{token}")
    typer.echo(f"{name} ({role}): {n} cases assigned; the link is shown only now, keep it private",
               err=True)


@app.command()
def revoke(db: DbOpt, name: Annotated[str, typer.Option(help="Annotator whose link to disable.")]) -> None:
    """Disable an annotator's link and end their sessions (labels are kept)."""
    _store(db).revoke(name)
    typer.echo(f"revoked {name}'s link")


@app.command("list")
def list_(db: DbOpt) -> None:
    """Projects and annotators with their label counts (no links: only hashes are stored)."""
    store = _store(db)
    for p in store.list_projects():
        typer.echo(f"project {p['name']}: {p['kind']}, {p['items']} items")
    for a in store.list_annotators():
        typer.echo(f"annotator {a['name']}: {a['role']}, {a['status']}, {a['labels']} labels, "
                   f"{a['skipped']} skipped")


@app.command()
def export(
    db: DbOpt,
    out: Annotated[Path, typer.Option(help="JSONL file to write (owner-only; a .meta.json marks it private).")],
    project: Annotated[str | None, typer.Option(show_default='the only project', help="Project to export (needed when there are several).")] = None,
    annotator: Annotated[str | None, typer.Option(show_default='every annotator', help="Only this annotator's labels.")] = None,
) -> None:
    """Write a project's labels in the format its suite reads (withdrawn annotators left out)."""
    from carebench.annotate.export import export_project

    s = export_project(_store(db), out, project, annotator)
    typer.echo(f"wrote {s.rows} {s.kind} rows of project {s.project!r} to {out} "
               f"({s.skipped_left_out} skipped answers left out); PRIVATE: raw labels and notes, "
               f"see {s.meta_path}")
