"""``Execution.error``: bad input that ends a suite's work midway is written as a run (status,
records, metrics, report) and only then raised, so the CLI prints its one line and exits 2
while the run directory says what finished (construct's residual identifiers use this)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from carebench.engine.options import run_options
from carebench.engine.skeleton import Execution, read_records, run_suite
from carebench.report import Paragraph, Report, Section
from carebench.types import CarebenchError


class HalfDone:
    """Records two rows, then meets bad input (or not)."""

    name = "halfdone"

    def __init__(self, fail: bool):
        self.fail = fail

    def execute(self, run: Any) -> Execution:
        ex = Execution(records=[{"id": "a", "ok": True}, {"id": "b", "ok": False}], config={}, dataset={}, seeds={})
        if self.fail:
            ex.status, ex.error = "stopped", CarebenchError("row 3: field 'text': missing")
        return ex

    def read_records(self, run_dir: Path, manifest: Any) -> list[dict[str, Any]]:
        return read_records(run_dir)

    def score(self, records: list[dict[str, Any]], manifest: Any) -> dict[str, Any]:
        return {"n": len(records), "ok": sum(r["ok"] for r in records)}

    def render(self, metrics: Any, records: Any, manifest: Any) -> Report:
        return Report(title="half done", sections=[Section("Rows", [Paragraph(f"{metrics['n']} rows")])])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def test_error_is_raised_after_the_run_is_written(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(CarebenchError, match="row 3: field 'text': missing"):
        run_suite(HalfDone(fail=True), run_options(out=str(out), no_cache=True, progress=False))
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "stopped" and manifest["suite"] == "halfdone"
    assert manifest["error"] == "row 3: field 'text': missing"  # the run directory says why, as the console did
    assert [r["id"] for r in _lines(out / "records.jsonl")] == ["a", "b"]
    assert json.loads((out / "metrics.json").read_text("utf-8")) == {"n": 2, "ok": 1}  # counted by hand
    assert "2 rows" in (out / "report.md").read_text("utf-8")


def test_no_error_returns_the_run(tmp_path):
    out = run_suite(HalfDone(fail=False), run_options(out=str(tmp_path / "run"), no_cache=True, progress=False))
    assert json.loads((Path(out) / "manifest.json").read_text("utf-8"))["status"] == "complete"
