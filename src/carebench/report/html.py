"""Render a :class:`Report` to one self-contained HTML page.

Why this shape: the page must open anywhere (e-mail attachment, air-gapped review
machine) and must never execute anything that came from a dataset or a model.  So
CSS is inline, figures are base64 data URIs, a Content-Security-Policy forbids
scripts and remote loads, and jinja2 autoescaping is on with no ``|safe`` anywhere:
the Python side hands the template plain strings only.
"""

from __future__ import annotations

import base64
import struct
from functools import lru_cache
from importlib import metadata
from typing import Any

import jinja2

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
        return {
            "type": "table",
            "caption": block.caption,
            "columns": block.columns,
            "align": block.alignments(),
            "rows": [
                [(cell, ranks.get((i, j), 0)) for j, cell in enumerate(row)]
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
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=str(report.title),
        subtitle=report.subtitle,
        notes=[str(n) for n in report.notes],
        sections=sections,
        generator=_generator(),
    )
