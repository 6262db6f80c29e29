"""`carebench report DIR` on a copy of a construct run must write the same bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

from carebench.cli import main

OUTPUTS = ("metrics.json", "report.md", "report.html")


def assert_report_reproduces(run_dir: Path, copy: Path) -> None:
    """Copy the run, delete its metrics, report and figures, re-render the copy and
    compare every file byte for byte with the run's own."""
    shutil.copytree(run_dir, copy)
    for name in OUTPUTS:
        (copy / name).unlink()
    shutil.rmtree(copy / "figures", ignore_errors=True)
    assert main(["report", str(copy)]) == 0
    for name in OUTPUTS:
        assert (copy / name).read_bytes() == (run_dir / name).read_bytes(), name
    figures = sorted(p.name for p in (run_dir / "figures").glob("*.png")) if (run_dir / "figures").exists() else []
    assert figures == (sorted(p.name for p in (copy / "figures").glob("*.png")) if figures else figures)
    for name in figures:
        assert (copy / "figures" / name).read_bytes() == (run_dir / "figures" / name).read_bytes(), name
