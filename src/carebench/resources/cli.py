"""``carebench resources check|show``: check anyone's logs for where replies send people; list a country.

No model is called. ``check`` reads JSONL rows ``{id, locale, text}`` (or, with
``--transcripts``, converse-style rows ``{id, locale, turns: [{role, content}]}`` whose
``assistant`` turns are checked as one conversation) and writes one row per input row,
in order: ``{id, locale, locale_status, routing, mentions: [{text, match, kind,
countries, resource, method, start, end}]}``. A row whose locale is missing or invalid
keeps its place with ``routing`` ``null`` and is listed on the console. A malformed
registry or reply file is one error line (exit 2) and no output file.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(help="Crisis resources: check where replies send people (no model call); show a "
                       "country's registry entries.", no_args_is_help=True)

ResourcesOpt = Annotated[Path | None, typer.Option(
    "--resources", show_default="the built-in snapshot",
    help="Registry: carebench JSON, a CSV (country,kind,name,method,number,keyword,url,languages) or an "
         "open-helplines directory.")]
#: conversation records of other kinds (a converse run's walks) are not transcripts
CHATBOT_ROLES = ("assistant", "chatbot")


def _row_id(path: Path, loc: str, row: dict[str, Any]) -> str | int:
    rid = row.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int) or (isinstance(rid, str) and not rid.strip()):
        raise _err(path, loc, "missing or invalid 'id' (a string or an integer)")
    return rid


def _err(path: Path, loc: str, msg: str):
    from carebench.types import CarebenchError

    return CarebenchError(f"{path}:{loc.removeprefix('line ')}: {msg}")


def _chatbot_turns(path: Path, loc: str, row: dict[str, Any]) -> list[str]:
    turns = row.get("turns")
    if not isinstance(turns, list):
        raise _err(path, loc, "a transcript needs 'turns': [{role, content}, ...]")
    out = []
    for k, t in enumerate(turns):
        if not isinstance(t, dict) or not isinstance(t.get("role"), str) or not isinstance(t.get("content"),
                                                                                            str | None):
            raise _err(path, loc, f"turn {k}: expected {{role, content}} with string values")
        if t["role"] in CHATBOT_ROLES:
            out.append(t.get("content") or "")
    return out


def check_rows(path: Path, registry: Any, transcripts: bool) -> tuple[list[dict[str, Any]], int]:
    """(one output row per input row, records skipped as not conversations); raises on a malformed row."""
    from carebench.datasets.files import read_rows
    from carebench.resources.check import check_conversation, check_reply

    out, skipped = [], 0
    for loc, row in read_rows(path, "jsonl"):
        if transcripts and row.get("kind") not in (None, "conversation"):
            skipped += 1
            continue
        rid = _row_id(path, loc, row)
        locale = row.get("locale")
        if transcripts:
            res = check_conversation(_chatbot_turns(path, loc, row), locale, registry)
        else:
            text = row.get("text")
            if not isinstance(text, str):
                raise _err(path, loc, "missing or invalid 'text' (a string)")
            res = check_reply(text, locale, registry)
        out.append({"id": rid, **res.to_dict(), "locale": locale})
    return out, skipped


@app.command("check")
def check(
    replies: Annotated[Path, typer.Argument(help="JSONL rows {id, locale, text} (or transcripts with "
                                                 "--transcripts).")],
    out: Annotated[Path, typer.Option("--out", help="Output JSONL: one checked row per input row, in order.")],
    resources: ResourcesOpt = None,
    transcripts: Annotated[bool, typer.Option(
        "--transcripts", help="Rows are converse-style transcripts {id, locale, turns}; the chatbot's turns "
                              "are checked together.")] = False,
) -> None:
    """Find the crisis-resource mentions in each reply and give its routing verdict."""
    from rich.console import Console
    from rich.table import Table

    from carebench.fileio import atomic_write_text
    from carebench.resources.builtin import load_registry
    from carebench.resources.check import VERDICTS

    reg = load_registry(resources)
    rows, skipped = check_rows(replies, reg, transcripts)
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))

    n = len(rows)
    verdicts = Counter(r["routing"] for r in rows)
    table = Table(title=f"Routing of {n} {'conversation' if transcripts else 'reply'} row(s)")
    table.add_column("verdict")
    table.add_column("rows", justify="right")
    table.add_column("share", justify="right")
    for v in (*VERDICTS, None):
        if v is None and not verdicts[None]:
            continue
        label = v if v is not None else "no usable locale"
        table.add_row(label, str(verdicts[v]), f"{verdicts[v] / n:.1%}" if n else "-")
    console = Console(highlight=False)
    console.print(table, markup=False)
    mentions = Counter(m["match"] for r in rows for m in r["mentions"])
    with_unknown = sum(any(m["match"] == "unknown" for m in r["mentions"]) for r in rows)
    typer.echo(f"mentions: {mentions['local']} local, {mentions['other_region']} other_region, "
               f"{mentions['unknown']} unknown; rows giving an unknown number: {with_unknown}")
    bad = [r for r in rows if r["locale_status"] != "ok"]
    if bad:
        ids = ", ".join(f"{r['id']} ({r['locale_status']})" for r in bad[:10])
        typer.echo(f"locale missing or invalid in {len(bad)} row(s), kept with routing null: {ids}"
                   + (" ..." if len(bad) > 10 else ""))
    if skipped:
        typer.echo(f"skipped {skipped} record(s) that are not conversations (kind other than 'conversation')")
    typer.echo(f"registry {reg.origin} version {reg.version} sha256 {reg.sha256[:16]}; wrote {out}")


def _number_text(number: str) -> str:
    if not number.startswith("+"):
        return f"{number} (short code, as dialled)"
    import phonenumbers

    num = phonenumbers.parse(number, None)
    return (f"{phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.INTERNATIONAL)} "
            f"(national: {phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.NATIONAL)})")


@app.command("show")
def show(
    country: Annotated[str, typer.Argument(help="ISO 3166-1 alpha-2 country code, e.g. BR.")],
    resources: ResourcesOpt = None,
) -> None:
    """Print what the registry holds for one country."""
    from carebench.resources.builtin import load_registry
    from carebench.resources.registry import valid_country
    from carebench.types import CarebenchError

    cc = country.strip().upper()
    if not valid_country(cc):
        raise CarebenchError(f"invalid country {country!r} (ISO 3166-1 alpha-2, e.g. BR)")
    reg = load_registry(resources)
    typer.echo(f"registry {reg.origin} version {reg.version} sha256 {reg.sha256[:16]}")
    entries = reg.for_country(cc)
    if not entries:
        typer.echo(f"{cc}: no entry in this registry")
        return
    for r in entries:
        head = f"{cc} {r.kind}: {r.name}" + (f" [{r.category}]" if r.category else "")
        typer.echo(head)
        for c in r.contacts:
            what = _number_text(c.number) if c.number else c.url
            extra = [f"keyword {c.keyword}"] if c.keyword else []
            extra += [f"languages {';'.join(c.languages)}"] if c.languages else []
            extra += [f"hours {c.hours}"] if c.hours else []
            typer.echo(f"  {c.method:5} {what}" + (f"  ({', '.join(extra)})" if extra else ""))
        if r.website:
            typer.echo(f"  web   {r.website}")
        if r.source:
            typer.echo(f"  source: {r.source}")
