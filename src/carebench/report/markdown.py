"""Render a :class:`Report` to GitHub-flavoured markdown.

Text is plain text, so everything markdown (or the HTML markdown allows) could
interpret is neutralised: ``<`` becomes ``&lt;`` (no raw HTML, whatever renderer
reads the file), inline markers are backslash-escaped, a line that would start a
heading, quote or list is escaped, and table cells get ``|`` escaped and newlines
turned into ``<br>``.  Numbers we formatted ourselves are left untouched so
``0.562 [0.519, 0.599]`` stays readable in the raw file.
"""

from __future__ import annotations

import re

from carebench.report.document import (
    Block,
    Callout,
    Details,
    Figure,
    Headline,
    KeyValue,
    Links,
    Paragraph,
    Pre,
    Report,
    Table,
    format_value,
    is_numeric,
    map_texts,
)

__all__ = ["escape_cell", "escape_text", "headline_markdown", "render_markdown"]

_INLINE_CHARS = "\\`*_[~$"  # inline markers escape_text backslash-escapes (backslash first)
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+[.)])")
_ALERT = {"info": "NOTE", "warning": "WARNING"}
_RULE = {"left": ":---", "right": "---:", "center": ":---:"}


def escape_text(text: object) -> str:
    """Escape plain text so a markdown renderer shows it literally and renders no HTML."""
    s = str(text)
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
    # one str.replace per marker, the backslash first so added ones are not doubled
    # (a regex substitution with a group template costs a Python call per match)
    for c in _INLINE_CHARS:
        if c in s:
            s = s.replace(c, "\\" + c)
    if "&" in s:
        s = _ENTITY.sub("&amp;", s)
    s = s.replace("<", "&lt;")
    lines = []
    for line in s.split("\n"):
        line = line.lstrip(" \t")  # 4 leading spaces would start a code block
        m = _LINE_START.match(line)
        if m:
            marker = m.group(2)
            line = (marker[:-1] + "\\" + marker[-1] if marker[0].isdigit() else "\\" + marker) + (
                line[m.end():]
            )
        lines.append(line)
    return "\n".join(lines)


def _one_line(text: object) -> str:
    return " ".join(escape_text(text).split("\n")).strip()


def escape_cell(text: object) -> str:
    """Escape text for a GFM table cell: ``|`` escaped, newlines become ``<br>``."""
    s = escape_text(text).strip()
    return s.replace("|", "\\|").replace("\n", "<br>")


def _fence(text: str) -> str:
    runs = [len(m) for m in re.findall(r"`+", text)]
    return "`" * max(3, max(runs, default=0) + 1)


def _table(t: Table, memo: dict[str, str]) -> str:
    if not t.columns:
        return ""
    shown = t.shown()
    columns = []
    for texts, plain in zip(shown.texts, shown.plain, strict=True):
        if all(plain):  # numbers and empty cells are shown as formatted
            columns.append(list(texts))
        elif not any(plain):
            columns.append(map_texts(escape_cell, texts, memo))
        else:
            columns.append([x if p else escape_cell(x) for x, p in zip(texts, plain, strict=True)])
    for (i, j), rank in t.ranks().items():
        if 0 <= i < shown.n_rows and 0 <= j < len(columns) and (cell := columns[j][i]):
            columns[j][i] = f"**{cell}**" if rank == 1 else f"<u>{cell}</u>" if rank == 2 else cell
    head = "| " + " | ".join(map_texts(escape_cell, t.columns, memo)) + " |"
    rule = "| " + " | ".join(_RULE[a] for a in shown.align) + " |"
    out = [head, rule, *("| " + " | ".join(row) + " |" for row in zip(*columns, strict=True))]
    if t.caption:
        out = [f"**{_one_line(t.caption)}**", "", *out]
    return "\n".join(out)


def _block(b: Block, memo: dict[str, str]) -> str:
    """One block's markdown; ``memo`` holds each distinct table cell's escaped text."""
    if isinstance(b, Paragraph):
        return escape_text(b.text).strip()
    if isinstance(b, Callout):
        body = escape_text(b.text).strip().split("\n")
        return "\n".join([f"> [!{_ALERT[b.kind]}]", *(f"> {line}".rstrip() for line in body)])
    if isinstance(b, Pre):
        fence = _fence(b.text)
        return f"{fence}text\n{b.text.rstrip(chr(10))}\n{fence}"
    if isinstance(b, KeyValue):
        return "\n".join(
            f"- **{_one_line(k)}:** "
            + (format_value(v, b.number_format) if is_numeric(v) or v is None
               else _one_line(format_value(v)))
            for k, v in b.pairs
        )
    if isinstance(b, Links):  # hrefs are checked relative paths: only ')' and spaces need care
        return "\n".join(f"- [{_one_line(t).replace(']', chr(92) + ']')}](<{h}>)" for t, h in b.items)
    if isinstance(b, Table):
        return _table(b, memo)
    if isinstance(b, Figure):
        alt = _one_line(b.caption).replace("]", "\\]")
        return f"![{alt}](figures/{b.filename})\n\n*{_one_line(b.caption)}*"
    if isinstance(b, Details):
        items = [f"- **{_one_line(b.summary)}**"]
        for child in b.blocks:
            text = _block(child, memo)
            if not text:
                continue
            if isinstance(child, (Details, KeyValue)):  # already a list: nest it, no extra bullet
                items.append(_indent(text, "  ", "  "))
            else:
                items.append(_indent(text, "  - ", "    "))
        return "\n".join(items)
    raise TypeError(f"{type(b).__name__} is not a report block")


def _indent(text: str, first: str, rest: str) -> str:
    lines = text.split("\n")
    return "\n".join(
        [first + lines[0], *((rest + line) if line else "" for line in lines[1:])]
    )


def headline_markdown(h: Headline) -> str:
    """The answer-first box as a GFM "important" alert: verdict, measure, rows, caveats."""
    lines = ["> [!IMPORTANT]", f"> **Headline: {_one_line(h.verdict)}**"]
    if h.measure is not None:
        lines += [">", f"> {_one_line(h.measure_text())}"]
    if h.rows:
        lines += [">", *(f"> - {_one_line(f'{k}: {v}')}" for k, v in h.rows)]
    if h.caveats:
        lines += [">", *(f"> - Caveat: {_one_line(c)}" for c in h.caveats)]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    """The whole report as GitHub-flavoured markdown; figures link to ``figures/<name>.png``."""
    report.figures()  # reject two different figures sharing one name before rendering
    parts = [f"# {_one_line(report.title)}"]
    if report.subtitle:
        parts.append(f"*{_one_line(report.subtitle)}*")
    for text in report.banners:
        parts.append(f"> [!WARNING]\n> {_one_line(text)}")
    if report.headline is not None:
        parts.append(headline_markdown(report.headline))
    if report.notes:
        parts.append("\n".join(f"- {_one_line(n)}" for n in report.notes))
    anchors = report.anchors()
    if report.sections:
        toc = [f"{k}. [{_one_line(s.title).replace(']', chr(92) + ']')}](#{a})"
               for k, (s, a) in enumerate(zip(report.sections, anchors, strict=True), 1)]
        parts.append("**Contents**\n\n" + "\n".join(toc))
    memo: dict[str, str] = {}
    for s, a in zip(report.sections, anchors, strict=True):
        parts.append(f'<a id="{a}"></a>\n\n## {_one_line(s.title)}')
        parts.extend(text for b in s.blocks if (text := _block(b, memo)))
    return "\n\n".join(parts) + "\n"
