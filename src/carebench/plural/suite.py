"""The plural suite in the suite table: ``carebench report DIR`` for every plural run kind.

Each plural command is its own skeleton object (a
:class:`~carebench.plural.runs.PluralCommand`): :class:`RunCommand`,
:class:`SampleCommand`, :class:`CalibrateCommand`, :class:`FreezeCommand`,
:class:`LabelCommand` and :class:`AgreementCommand`. A run directory's manifest
names its ``kind``; :class:`PluralSuite` re-scores and re-renders any of them by
handing the records to the command of that kind (:func:`suite_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from carebench.plural.runs import SUITE
from carebench.report import Report
from carebench.run import Run
from carebench.types import CarebenchError


def suite_of(kind: Any) -> Any:
    """The command object of one plural run kind (configless: it scores and renders)."""
    if kind == "run":
        from carebench.plural.experiment import RunCommand as S
    elif kind == "sample":
        from carebench.plural.experiment import SampleCommand as S
    elif kind == "calibrate":
        from carebench.plural.calibration import CalibrateCommand as S
    elif kind == "freeze":
        from carebench.plural.release import FreezeCommand as S
    elif kind == "label":
        from carebench.plural.release import LabelCommand as S
    elif kind == "agreement":
        from carebench.plural.agreement import AgreementCommand as S
    else:
        raise CarebenchError(f"no plural report for run kind {kind!r} (manifest.json)")
    return S()


class PluralSuite:
    """Scores and renders a plural run directory of any kind (see the module docstring)."""

    name = SUITE

    def plan(self, run: Run) -> Any:
        raise CarebenchError("run a plural command (carebench plural ...) to plan it")

    def execute(self, run: Run) -> Any:
        raise CarebenchError("run a plural command (carebench plural ...) to execute it")

    def read_records(self, run_dir: Path, manifest: Mapping[str, Any]) -> Any:
        return suite_of(manifest.get("kind")).read_records(run_dir, manifest)

    def score(self, records: Any, manifest: Mapping[str, Any]) -> dict[str, Any]:
        return suite_of(manifest.get("kind")).score(records, manifest)

    def render(self, metrics: Mapping[str, Any], records: Any, manifest: Mapping[str, Any]) -> Report:
        return suite_of(manifest.get("kind")).render(metrics, records, manifest)
