"""Render a :class:`Report` to one self-contained HTML page.

Why this shape: the page must open anywhere (e-mail attachment, air-gapped review
machine) and must never execute anything that came from a dataset or a model.  So
CSS is inline, figures are base64 data URIs, and a Content-Security-Policy forbids
remote loads and every script but one.

Every piece of text from the report (dataset and model text included) passes through
``markupsafe.escape`` (the function Jinja's autoescaping calls) before it meets markup;
the only markup is the constant tags written here and the page shell in
``templates/report.html`` (a :class:`string.Template`, filled with escaped values only).
The page is built in Python rather than by a Jinja macro because a paper-scale report
holds about 100,000 table cells, and a per-cell macro call cost most of its render time.

The one script is carebench's own table sorter (``templates/sort_table.js``), included
only when a table is ``sortable``. The policy admits it by its SHA-256 hash, so no other
inline script (e.g. markup smuggled into dataset text) could run even if it reached the
page; it moves existing rows and never inserts text as HTML. Without scripts the table
reads as it is (progressive enhancement).
"""

from __future__ import annotations

import base64
import hashlib
import re
import string
import struct
from functools import lru_cache
from importlib import metadata, resources

from markupsafe import escape

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
    iter_blocks,
)

__all__ = ["headline_html", "render_html"]

_CALLOUT_LABELS = {"info": "Note:", "warning": "Warning:"}

#: a token long enough to widen a table column on a phone (NUL separates a column's cells)
_LONG_TOKEN = re.compile(r"(?<![^\s\0])[^\s\0]{20,}")
#: where such a token may wrap: after its punctuation (never inside a word, nor in an escaped "</")
_AFTER_PUNCT = re.compile(r"(?<!&lt;)([/:@._=+,|-]+)(?=[^\s\0])")


#: in prose, a long token wraps after a slash only: the words beside it stay searchable as typed
_AFTER_SLASH = re.compile(r"(?<!&lt;)(/+)(?=[^\s\0/])")


def _may_have_long_token(text: str) -> bool:
    """A quick filter before the regular expressions: any whitespace-free run of 20 characters."""
    return max(map(len, text.split()), default=0) >= 20


def _prose_breaks(escaped: str) -> str:
    """Escaped prose with a ``<wbr>`` after the slashes of each long token (a URL, a path)."""
    if not _may_have_long_token(escaped):
        return escaped
    return _LONG_TOKEN.sub(lambda m: _AFTER_SLASH.sub(r"\1<wbr>", m.group()), escaped)


def _soft_breaks(escaped: str) -> str:
    """Escaped text with a ``<wbr>`` after the punctuation of each long token (a model
    spec, a URL, a file path), so a table column can be narrow on a phone without a word
    being broken mid-word (the page's CSS never breaks words anywhere)."""
    if not _may_have_long_token(escaped):
        return escaped
    return _LONG_TOKEN.sub(lambda m: _AFTER_PUNCT.sub(r"\1<wbr>", m.group()), escaped)
_RANK_CLASS = {1: " best", 2: " second"}


def _template_text(name: str) -> str:
    return (resources.files("carebench.report") / "templates" / name).read_text("utf-8")


@lru_cache(maxsize=1)
def _page() -> tuple[string.Template, str]:
    """The page shell (head, inline CSS) up to its ``$body`` slot, and the constant rest."""
    head, tail = _template_text("report.html").split("$body", 1)
    return string.Template(head), tail


@lru_cache(maxsize=1)
def _sort_script() -> tuple[str, str]:
    """The table sorter's source and its CSP hash source (``sha256-...``, quoted by the page)."""
    js = _template_text("sort_table.js")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    return js, f"sha256-{digest}"


@lru_cache(maxsize=1)
def _generator() -> str:
    try:
        return f"carebench {metadata.version('carebench')}"
    except metadata.PackageNotFoundError:
        return "carebench"


def _png_size(png: bytes) -> tuple[int, int] | None:
    """Width/height from the IHDR chunk, so the browser reserves space before decoding."""
    if len(png) >= 24 and png[12:16] == b"IHDR":
        return struct.unpack(">II", png[16:24])
    return None


def _escape(value: object) -> str:
    """``markupsafe.escape`` (what Jinja's autoescaping calls) as a plain ``str``: a
    ``Markup`` would escape whatever is later added to it."""
    return str(escape(value))


class _Html:
    """One rendering: the output pieces and each distinct text's escaped form."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.memo: dict[str, str] = {}

    def text(self, value: object) -> str:
        """Escaped prose shown on the page (not an attribute): long tokens may wrap after a
        slash (see :func:`_prose_breaks`); markup given on purpose is left as it is."""
        return _prose_breaks(self.esc(value)) if type(value) is str else self.esc(value)

    def esc(self, value: object) -> str:
        # only exact str is remembered: an equal str subclass may escape differently
        # (markupsafe.Markup has __html__ and is not escaped)
        if type(value) is str:
            out = self.memo.get(value)
            if out is None:
                out = self.memo[value] = _escape(value)
            return out
        return _escape(value)

    def text_column(self, texts: list[str]) -> list[str]:
        """:meth:`escape_column` for text shown in cells: long tokens may wrap at punctuation."""
        out = self.escape_column(texts)
        if not out:
            return out
        if not _may_have_long_token(" ".join(out)):
            return out
        joined = "\0".join(out)
        if set(map(type, texts)) == {str} and joined.count("\0") == len(out) - 1:
            # one pass over the column: a token never spans the NUL between two cells
            return _soft_breaks(joined).split("\0")
        # markup given on purpose (an object with __html__, not a str) is left as it is
        return [_soft_breaks(x) if type(t) is str else x for t, x in zip(texts, out, strict=True)]

    def escape_column(self, texts: list[str]) -> list[str]:
        """Each text escaped, a whole column in one ``escape`` call: escaping replaces single
        characters (``&<>'"``), so escaping the texts joined by NUL and splitting there gives
        each text's escape. Columns with a NUL inside a text, or not all exact ``str``, are
        escaped text by text."""
        if not texts:
            return []
        if set(map(type, texts)) == {str}:
            joined = "\0".join(texts)
            if joined.count("\0") == len(texts) - 1:
                return _escape(joined).split("\0")
        return [self.esc(x) for x in texts]

    def block(self, b: Block) -> None:
        e, t, put = self.esc, self.text, self.out.append
        if isinstance(b, Paragraph):
            put(f"\n<p>{t(str(b.text))}</p>")
        elif isinstance(b, Callout):
            put(f'\n<div class="callout {e(b.kind)}" role="note"><strong>'
                f"{e(_CALLOUT_LABELS[b.kind])}</strong> {t(str(b.text))}</div>")
        elif isinstance(b, Pre):
            put(f"\n<pre>{e(str(b.text))}</pre>")
        elif isinstance(b, KeyValue):
            put('\n<table class="kv">')
            for k, v in b.pairs:
                num = ' class="num"' if is_numeric(v) else ""
                put(f'\n<tr><th scope="row">{t(str(k))}</th><td{num}>'
                    f"{t(format_value(v, b.number_format))}</td></tr>")
            put("\n</table>")
        elif isinstance(b, Links):
            put('\n<ul class="links">')
            for text, href in b.items:
                put(f'\n<li><a href="{e(href)}">{t(text)}</a></li>')
            put("\n</ul>")
        elif isinstance(b, Table):
            self.table(b)
        elif isinstance(b, Figure):
            size = _png_size(b.png)
            caption = e(str(b.caption))
            dims = f' width="{e(size[0])}" height="{e(size[1])}"' if size and size[0] else ""
            data = e(base64.b64encode(b.png).decode("ascii"))
            put(f'\n<figure id="{e(f"fig-{b.name}")}">\n<img src="data:image/png;base64,{data}" '
                f'alt="{caption}"{dims}>\n<figcaption>{_prose_breaks(caption)}</figcaption>\n</figure>')
        elif isinstance(b, Details):
            put(f"\n<details{' open' if b.open else ''}>\n<summary>{t(str(b.summary))}</summary>"
                '\n<div class="details-body">')
            for child in b.blocks:
                self.block(child)
            put("\n</div>\n</details>")
        else:
            raise TypeError(f"{type(b).__name__} is not a report block")

    def table(self, t: Table) -> None:
        """Rows without a highlighted cell go through one format string per table; the
        few highlighted rows are written cell by cell."""
        e, put = self.esc, self.out.append
        shown = t.shown()
        sortable = t.sorts()
        align = [e(a) for a in shown.align]
        # the cue's words are CSS content, shown only while the box can scroll (templates/report.html)
        put(f'\n<div class="table-wrap">\n<div class="scroll-cue" aria-hidden="true"></div>'
            f'\n<table class="data{" sortable" if sortable else ""}">')
        if t.caption:
            put(f"\n<caption>{self.text(t.caption)}</caption>")
        put("\n<thead><tr>")
        for j, c in enumerate(t.columns):
            kind = (f' data-sort-type="{"number" if shown.numeric[j] else "text"}"'
                    if sortable else "")
            put(f'<th scope="col" class="{align[j]}"{kind}>{_soft_breaks(e(c))}</th>')
        put("</tr></thead>\n<tbody>")
        cells = [self.text_column(column) for column in shown.texts]
        # a row format holds every '<td class="ALIGN"...</td>' of a row; in a sortable table
        # each cell's piece is ' data-sort="KEY">TEXT', else '>' is in the format
        if sortable:
            attrs = [[f' data-sort="{k}"' for k in self.escape_column(column)]
                     for column in t.sort_key_columns(shown)]
            pieces = [[f"{a}>{x}" for a, x in zip(column_attrs, column, strict=True)]
                      for column_attrs, column in zip(attrs, cells, strict=True)]
            cell_format = '<td class="{}"{{}}</td>'
        else:
            attrs, pieces = None, cells
            cell_format = '<td class="{}">{{}}</td>'
        ranks = t.ranks()
        ranked = {i for i, _ in ranks}
        row_format = "\n<tr>" + "".join(
            cell_format.format(a.replace("{", "{{").replace("}", "}}")) for a in align) + "</tr>"
        rows = zip(*pieces, strict=True) if pieces else ((),) * shown.n_rows
        for i, row in enumerate(rows):
            if i not in ranked:
                put(row_format.format(*row))
                continue
            put("\n<tr>")
            for j, column in enumerate(cells):
                rank = ranks.get((i, j), 0)
                x = column[i]
                if rank == 1:
                    x = f"<strong>{x}</strong>"
                elif rank == 2:
                    x = f"<u>{x}</u>"
                attr = attrs[j][i] if attrs is not None else ""
                put(f'<td class="{align[j]}{_RANK_CLASS.get(rank, "")}"{attr}>{x}</td>')
            put("</tr>")
        put("\n</tbody>\n</table>\n</div>")

    def headline(self, h: Headline) -> None:
        """The answer-first box; its class names let a reader (or a test) find each part."""
        e, put = self.esc, self.out.append
        put('\n<div class="headline" role="region" aria-label="Headline">'
            f'\n<p class="headline-verdict"><strong>{e(h.verdict)}</strong></p>')
        if h.measure is not None:
            put(f'\n<p class="headline-measure">{e(h.measure_text())}</p>')
        if h.rows:
            put('\n<table class="kv headline-rows">')
            for k, v in h.rows:
                put(f'\n<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>')
            put("\n</table>")
        if h.caveats:
            put('\n<ul class="headline-caveats">')
            for c in h.caveats:
                put(f"\n<li>{e(c)}</li>")
            put("\n</ul>")
        put("\n</div>")

    def document(self, report: Report, script: str, generator: str) -> None:
        e, put = self.esc, self.out.append
        put(f"<header>\n<h1>{e(str(report.title))}</h1>")
        if report.subtitle:
            put(f'\n<p class="subtitle">{self.text(report.subtitle)}</p>')
        for text in report.banners:
            put(f'\n<div class="banner" role="alert"><strong>Warning:</strong> {self.text(str(text))}</div>')
        if report.headline is not None:
            self.headline(report.headline)
        if report.notes:
            put('\n<ul class="notes">')
            for n in report.notes:
                put(f"\n<li>{self.text(str(n))}</li>")
            put("\n</ul>")
        put("\n</header>")
        anchors = report.anchors()
        if report.sections:
            put('\n<nav class="toc" aria-label="Contents">\n<strong>Contents</strong>\n<ol>')
            for s, a in zip(report.sections, anchors, strict=True):
                put(f'\n<li><a href="#{e(a)}">{e(str(s.title))}</a></li>')
            put("\n</ol>\n</nav>")
        put("\n<main>")
        for s, a in zip(report.sections, anchors, strict=True):
            put(f'\n<section id="{e(a)}">\n<h2>{e(str(s.title))}</h2>')
            for b in s.blocks:
                self.block(b)
            put("\n</section>")
        put(f"\n</main>\n<footer>{e(generator)}</footer>")
        if script:
            # carebench's own constant script, never data, inserted verbatim (inside <script>
            # the browser does not decode entities); the CSP pins its hash
            put(f"\n<script>{script}</script>")


def headline_html(h: Headline) -> str:
    """The headline box alone, for a page not built from a :class:`Report`."""
    html = _Html()
    html.headline(h)
    return "".join(html.out)


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8 text)."""
    report.figures()  # reject two different figures sharing one name before rendering
    sortable = any(isinstance(b, Table) and b.sorts()
                   for s in report.sections for b in iter_blocks(s.blocks))
    script, script_hash = _sort_script() if sortable else ("", "")
    generator = _generator()
    html = _Html()
    html.document(report, script, generator)
    e = html.esc
    head, tail = _page()
    return "".join([head.substitute(
        script_policy=f"; script-src '{e(script_hash)}'" if script_hash else "",
        generator=e(generator),
        title=e(str(report.title)),
    ), *html.out, tail])
