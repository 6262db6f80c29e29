"""Compare and leaderboard directories in the run skeleton, so ``carebench report DIR``
re-renders them like any run.

Their record is ``metrics.json`` itself: a comparison is computed once from two run
directories (which may move or be deleted later), and the report is a pure function
of it and the manifest, so a re-render rewrites the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carebench.report import Report
from carebench.types import CarebenchError


class _RecordedMetrics:
    name = ""

    def plan(self, run: Any) -> Any:
        raise CarebenchError(f"run carebench {self.name} to make a {self.name} directory")

    execute = plan

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> dict[str, Any]:
        from carebench.engine.rundir import read_json

        return read_json(Path(run_dir) / "metrics.json")

    def score(self, records: dict[str, Any], manifest: Mapping[str, Any]) -> dict[str, Any]:
        return records


class CompareSuite(_RecordedMetrics):
    name = "compare"

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.compare.report import compare_report

        return compare_report(metrics)

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.compare.report import compare_headline

        return compare_headline(metrics)


class LeaderboardSuite(_RecordedMetrics):
    name = "leaderboard"

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        from carebench.compare.report import leaderboard_report

        return leaderboard_report(metrics)

    def headline(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Any:
        from carebench.compare.report import leaderboard_headline

        return leaderboard_headline(metrics)
