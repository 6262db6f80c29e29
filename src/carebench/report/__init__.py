"""Report rendering: one document model, rendered to markdown and self-contained HTML.

Suites build a :class:`Report` of :class:`Section` s and blocks, make figures with the
helpers in :mod:`carebench.report.figures`, and call :func:`write_report`.
"""

from carebench.report.document import (
    MISSING,
    Block,
    Callout,
    Details,
    Figure,
    Headline,
    Interval,
    KeyValue,
    Links,
    Paragraph,
    Pre,
    Report,
    Section,
    Table,
    figure_name,
    format_value,
)
from carebench.report.figures import (
    NothingToShow,
    bar_chart,
    box_chart,
    confusion_heatmap,
    dot_interval_chart,
    fig_to_png,
    figure_or_sentence,
    heatmap,
    line_chart,
    scatter_chart,
    stacked_bar_chart,
)
from carebench.report.html import render_html
from carebench.report.markdown import render_markdown
from carebench.report.writer import atomic_write_bytes, write_report

__all__ = [
    "MISSING",
    "Block",
    "Callout",
    "Details",
    "Figure",
    "Headline",
    "Interval",
    "KeyValue",
    "Links",
    "NothingToShow",
    "Paragraph",
    "Pre",
    "Report",
    "Section",
    "Table",
    "atomic_write_bytes",
    "bar_chart",
    "box_chart",
    "confusion_heatmap",
    "dot_interval_chart",
    "fig_to_png",
    "figure_name",
    "figure_or_sentence",
    "format_value",
    "heatmap",
    "line_chart",
    "render_html",
    "render_markdown",
    "scatter_chart",
    "stacked_bar_chart",
    "write_report",
]
