"""A run directory re-rendered by ``carebench report DIR`` must give the same bytes."""

from __future__ import annotations

from pathlib import Path

from carebench.cli import main

RENDERED = ("metrics.json", "report.md", "report.html")


def assert_rerenders_byte_for_byte(run_dir: Path) -> None:
    """Delete the rendered files, re-render from the records alone, compare the bytes."""
    before = {name: (run_dir / name).read_bytes() for name in RENDERED}
    for name in RENDERED:
        (run_dir / name).unlink()
    assert main(["report", str(run_dir)]) == 0
    for name in RENDERED:
        assert (run_dir / name).read_bytes() == before[name], f"{run_dir.name}/{name} differs after re-rendering"
