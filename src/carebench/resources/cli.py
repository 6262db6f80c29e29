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
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from carebench.resources.builtin import load_registry
from carebench.resources.check import VERDICTS, check_conversation, check_reply
from carebench.types import CarebenchError

app = typer.Typer(help="Crisis resources: check where replies send people (no model call); show a "
                       "country's registry entries; audit a registry.", no_args_is_help=True)

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


@dataclass
class Tally:
    """What the console summary needs, counted while the rows are checked."""

    rows: int = 0
    verdicts: Counter = field(default_factory=Counter)
    matches: Counter = field(default_factory=Counter)
    with_unknown: int = 0
    bad_locale: list[str] = field(default_factory=list)  # the first ten, for the console
    bad_locales: int = 0
    skipped: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows += 1
        self.verdicts[row["routing"]] += 1
        ms = [m["match"] for m in row["mentions"]]
        self.matches.update(ms)
        self.with_unknown += "unknown" in ms
        if row["locale_status"] != "ok":
            self.bad_locales += 1
            if len(self.bad_locale) < 10:
                self.bad_locale.append(f"{row['id']} ({row['locale_status']})")


def check_rows(path: Path, registry: Any, transcripts: bool, out: IO[str]) -> Tally:
    """Check ``path`` row by row, writing one output JSON line per input row to ``out``; the tally.

    Streams both ways (the input is read line by line, each output line written as it is
    made): memory stays flat however many rows there are. A malformed row raises, and the
    caller's temp file (:func:`carebench.fileio.atomic_text_writer`) is then removed, so a bad
    row still writes nothing."""
    from carebench.datasets.files import stream_jsonl_rows

    tally = Tally()
    for loc, row in stream_jsonl_rows(path):
        if transcripts and row.get("kind") not in (None, "conversation"):
            tally.skipped += 1
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
        line = {"id": rid, **res.to_dict(), "locale": locale}
        tally.add(line)
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return tally


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

    from carebench.fileio import atomic_text_writer

    reg = load_registry(resources)
    if not replies.is_file():
        raise CarebenchError(f"{replies}: file not found")
    with atomic_text_writer(out) as fh:
        t = check_rows(replies, reg, transcripts, fh)

    n = t.rows
    table = Table(title=f"Routing of {n} {'conversation' if transcripts else 'reply'} row(s)")
    table.add_column("verdict")
    table.add_column("rows", justify="right")
    table.add_column("share", justify="right")
    for v in (*VERDICTS, None):
        if v is None and not t.verdicts[None]:
            continue
        label = v if v is not None else "no usable locale"
        table.add_row(label, str(t.verdicts[v]), f"{t.verdicts[v] / n:.1%}" if n else "-")
    Console(highlight=False).print(table, markup=False)
    typer.echo(f"mentions: {t.matches['local']} local, {t.matches['other_region']} other_region, "
               f"{t.matches['unknown']} unknown; rows giving an unknown number: {t.with_unknown}")
    if t.bad_locale:
        typer.echo(f"locale missing or invalid in {t.bad_locales} row(s), kept with routing null: "
                   + ", ".join(t.bad_locale) + (" ..." if t.bad_locales > len(t.bad_locale) else ""))
    if t.skipped:
        typer.echo(f"skipped {t.skipped} record(s) that are not conversations (kind other than 'conversation')")
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
    from carebench.resources.registry import valid_country

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
        typer.echo(f"  checked: {r.checked or 'never (see carebench resources audit)'}")


def _entry(r) -> str:
    return f"{r.country} {r.kind}: {r.name}" + (f" [{r.id}]" if r.id else "")


@app.command("audit")
def audit_cmd(
    resources: ResourcesOpt = None,
    months: Annotated[int, typer.Option("--months", min=1, help="An entry not checked within this many "
                                                                 "months is listed as stale.")] = 12,
    today: Annotated[str | None, typer.Option("--today", show_default="the current date",
                                              help="The date to audit as of (YYYY-MM-DD).")] = None,
) -> None:
    """List entries not checked recently, countries lacking a crisis line or an emergency number, and
    entries without a source (exit code 1 if there is one)."""
    import datetime

    from carebench.resources.audit import audit
    from carebench.resources.registry import valid_date

    if today is not None and not valid_date(today):
        raise CarebenchError(f"--today: invalid date {today!r} (YYYY-MM-DD)")
    day = datetime.date.fromisoformat(today) if today else datetime.date.today()
    reg = load_registry(resources)
    a = audit(reg, day, months)
    typer.echo(f"registry {reg.origin} version {reg.version} sha256 {reg.sha256[:16]}: "
               f"{len(reg.resources)} entries, {len(reg.countries)} countries; as of {day.isoformat()}")
    typer.echo(f"not checked since {a.cutoff.isoformat()} ({len(a.stale)}):")
    for r in a.stale:
        typer.echo(f"  {_entry(r)}: checked {r.checked or 'never'}; source {r.source or '-'}")
    for kind in ("crisis", "emergency"):
        ccs = [cc for cc, k in a.missing if k == kind]
        typer.echo(f"countries with no {'crisis line' if kind == 'crisis' else 'emergency number'} "
                   f"({len(ccs)}): {', '.join(ccs) if ccs else '-'}")
    if a.no_url:
        typer.echo(f"sources naming no page (no http(s) URL) ({len(a.no_url)}):")
        for r in a.no_url:
            typer.echo(f"  {_entry(r)}: {r.source}")
    if not a.ok:
        typer.echo(f"entries with no source ({len(a.no_source)}):")
        for r in a.no_source:
            typer.echo(f"  {_entry(r)}")
        raise typer.Exit(1)
