"""Render a :class:`Report` to one self-contained HTML page.

Why this shape: the page must open anywhere (e-mail attachment, air-gapped review
machine) and must never execute anything that came from a dataset or a model.  So
CSS is inline, figures are base64 data URIs, a Content-Security-Policy forbids
remote loads and every script but one, and jinja2 autoescaping is on with no ``|safe``
anywhere: the Python side hands the template plain strings only.

The one script is carebench's own table sorter (``templates/sort_table.js``), included
only when a table is ``sortable``. The policy admits it by its SHA-256 hash, so no other
inline script (e.g. markup smuggled into dataset text) could run even if it reached the
page; it moves existing rows and never inserts text as HTML. Without scripts the table
reads as it is (progressive enhancement).
"""

from __future__ import annotations

import base64
import hashlib
import struct
from functools import lru_cache
from importlib import metadata, resources
from typing import Any

import jinja2
from markupsafe import Markup

from carebench.report.document import (
    Block,
    Callout,
    Details,
    Figure,
    KeyValue,
    Paragraph,
    Pre,
    Report,
    Table,
    format_value,
    is_numeric,
    iter_blocks,
)

__all__ = ["render_html"]

_CALLOUT_LABELS = {"info": "Note:", "warning": "Warning:"}


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("carebench.report", "templates"),
        autoescape=True,  # unconditional: the template is .j2, not .html
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
    )


@lru_cache(maxsize=1)
def _sort_script() -> tuple[str, str]:
    """The table sorter's source and its CSP hash source (``sha256-...``, quoted by the template)."""
    js = (resources.files("carebench.report") / "templates" / "sort_table.js").read_text("utf-8")
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    return js, f"sha256-{digest}"


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


def _view(block: Block) -> dict[str, Any]:
    """Turn a block into plain strings and flags for the template (no markup here)."""
    if isinstance(block, Paragraph):
        return {"type": "paragraph", "text": str(block.text)}
    if isinstance(block, Callout):
        return {"type": "callout", "kind": block.kind, "label": _CALLOUT_LABELS[block.kind],
                "text": str(block.text)}
    if isinstance(block, Pre):
        return {"type": "pre", "text": str(block.text)}
    if isinstance(block, KeyValue):
        return {"type": "keyvalue", "pairs": [
            (str(k), format_value(v, block.number_format), is_numeric(v)) for k, v in block.pairs
        ]}
    if isinstance(block, Table):
        ranks = block.ranks()
        keys = block.sort_keys() if block.sortable else None
        return {
            "type": "table",
            "caption": block.caption,
            "columns": block.columns,
            "align": block.alignments(),
            "sortable": block.sortable,
            "numeric": block.numeric_columns(),
            "rows": [
                [(cell, ranks.get((i, j), 0), keys[i][j] if keys else None) for j, cell in enumerate(row)]
                for i, row in enumerate(block.formatted_rows())
            ],
        }
    if isinstance(block, Figure):
        size = _png_size(block.png)
        return {
            "type": "figure",
            "id": f"fig-{block.name}",
            "caption": str(block.caption),
            "data": base64.b64encode(block.png).decode("ascii"),
            "width": size[0] if size else None,
            "height": size[1] if size else None,
        }
    if isinstance(block, Details):
        return {"type": "details", "summary": str(block.summary), "open": block.open,
                "blocks": [_view(b) for b in block.blocks]}
    raise TypeError(f"{type(block).__name__} is not a report block")


def render_html(report: Report) -> str:
    """The whole report as one HTML document (UTF-8 text)."""
    report.figures()  # reject two different figures sharing one name before rendering
    sections = [
        {"title": str(s.title), "anchor": a, "blocks": [_view(b) for b in s.blocks]}
        for s, a in zip(report.sections, report.anchors(), strict=True)
    ]
    sortable = any(isinstance(b, Table) and b.sortable
                   for s in report.sections for b in iter_blocks(s.blocks))
    script, script_hash = _sort_script() if sortable else ("", "")
    template = _environment().get_template("report.html.j2")
    return template.render(
        # carebench's own constant script, never data: marked safe so its quotes survive
        # (inside <script> the browser does not decode entities); the CSP pins its hash
        script=Markup(script),
        script_src=script_hash,
        title=str(report.title),
        subtitle=report.subtitle,
        notes=[str(n) for n in report.notes],
        sections=sections,
        generator=_generator(),
    )
