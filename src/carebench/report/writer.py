"""Write a rendered report into a run directory without ever leaving half a file.

Why atomic: ``carebench report DIR`` re-renders over an existing report, and a crash
or Ctrl-C mid-write must leave the previous complete file (or none), never a
truncated one.  Everything is rendered in memory first, then each file is written
to a temporary file in the same directory and moved into place with ``os.replace``.
"""

from __future__ import annotations

import re
from pathlib import Path

from carebench.fileio import atomic_write_bytes
from carebench.report.document import Report
from carebench.report.html import render_html
from carebench.report.markdown import render_markdown

__all__ = ["atomic_write_bytes", "write_report"]


_ATTACHMENT = re.compile(r"^[A-Za-z0-9_.-]+$")


def write_report(report: Report, run_dir: Path) -> None:
    """Write ``figures/<name>.png``, ``report.md`` and ``report.html`` into ``run_dir``.

    Both documents are rendered before anything is written, so a rendering error
    leaves the directory untouched.  Figures go first so that ``report.md`` never
    points at an image that is not there yet.
    """
    run_dir = Path(run_dir)
    figures = report.figures()
    markdown = render_markdown(report).encode("utf-8")
    html = render_html(report).encode("utf-8")
    for name in report.attachments:
        if not _ATTACHMENT.match(name) or ".." in name:
            raise ValueError(f"attachment name {name!r} is not a plain file name")
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, text in report.attachments.items():
        atomic_write_bytes(run_dir / name, text.encode("utf-8"))
    if figures:
        fig_dir = run_dir / "figures"
        fig_dir.mkdir(exist_ok=True)
        for fig in figures:
            atomic_write_bytes(fig_dir / fig.filename, fig.png)
    atomic_write_bytes(run_dir / "report.md", markdown)
    atomic_write_bytes(run_dir / "report.html", html)
