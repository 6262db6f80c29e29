"""The suite table: every suite's command group and its run-skeleton object, by name.

The CLI mounts the suites listed here and ``carebench report DIR`` re-renders a run
through the suite its manifest names; nothing is found by guessing module names,
so a renamed module fails loudly instead of silently dropping a suite. This module
and the CLI are the application layer: the only places that import every suite.
To add a suite, add one row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.types import CarebenchError


@dataclass(frozen=True)
class SuiteEntry:
    help: str
    app: Callable[[], Any]  # the suite's Typer app (imported only when mounted)
    suite: Callable[[], Any]  # a carebench.experiment.Suite able to score and render runs
    demo: Callable[[], Any] | None = None  # run_demo(run_dir, model_spec=, quick=) for ``carebench demo``
    #: a carebench.compare.measures.Comparer for ``carebench compare`` / ``leaderboard`` (None: not comparable)
    comparer: Callable[[], Any] | None = None


def _risk_app():
    from carebench.risk.cli import app

    return app


def _risk_suite():
    from carebench.risk.suite import RiskSuite

    return RiskSuite()


def _risk_demo():
    from carebench.risk.demo import run_demo

    return run_demo


def _support_demo():
    from carebench.support.demo import run_demo

    return run_demo


def _support_app():
    from carebench.support.cli import app

    return app


def _support_suite():
    from carebench.support.suite import SupportSuite

    return SupportSuite()


def _plural_app():
    from carebench.plural.cli import app

    return app


def _plural_suite():
    from carebench.plural.suite import PluralSuite

    return PluralSuite()


def _plural_demo():
    from carebench.plural.demo import run_demo

    return run_demo


def _construct_app():
    from carebench.construct.cli import app

    return app


def _construct_suite():
    from carebench.construct.suite import ConstructSuite

    return ConstructSuite()


def _risk_comparer():
    from carebench.risk.compare import RiskComparer

    return RiskComparer()


def _support_comparer():
    from carebench.support.compare import SupportComparer

    return SupportComparer()


def _plural_comparer():
    from carebench.plural.compare import PluralComparer

    return PluralComparer()


def _converse_comparer():
    from carebench.converse.compare import ConverseComparer

    return ConverseComparer()


def _converse_app():
    from carebench.converse.cli import app

    return app


def _converse_suite():
    from carebench.converse.suite import ConverseSuite

    return ConverseSuite()


def _converse_demo():
    from carebench.converse.demo import run_demo

    return run_demo


def _annotate_app():
    from carebench.annotate.cli import app

    return app


SUITES: dict[str, SuiteEntry] = {
    "risk": SuiteEntry("graded risk measurement (Beyond the Flag)", _risk_app, _risk_suite, _risk_demo,
                       _risk_comparer),
    "support": SuiteEntry("rubric-scored crisis support (DistressBench)", _support_app, _support_suite,
                          _support_demo, _support_comparer),
    "plural": SuiteEntry("practitioner-calibrated reference policies and jury scoring (VEILED-SH)",
                         _plural_app, _plural_suite, _plural_demo, _plural_comparer),
    "construct": SuiteEntry("dataset construction (VEILED-SH §4)", _construct_app, _construct_suite),
    "converse": SuiteEntry("simulated conversations judged with decision-tree rubrics (VERA-MH)",
                           _converse_app, _converse_suite, _converse_demo, _converse_comparer),
}

def _batch_app():
    from carebench.batch.cli import app

    return app


#: tools beside the suites, mounted the same way
TOOLS: dict[str, Callable[[], Any]] = {"annotate": _annotate_app, "batch": _batch_app}


def _compare_suite():
    from carebench.compare.suite import CompareSuite

    return CompareSuite()


def _leaderboard_suite():
    from carebench.compare.suite import LeaderboardSuite

    return LeaderboardSuite()


#: directories written by the core tools (``carebench compare``, ``carebench leaderboard``),
#: re-rendered by ``carebench report DIR`` like a suite's runs
TOOL_RUNS: dict[str, Callable[[], Any]] = {"compare": _compare_suite, "leaderboard": _leaderboard_suite}


def comparer(name: str) -> Any:
    """The comparer of suite ``name`` (None when its runs cannot be compared)."""
    entry = SUITES.get(str(name))
    return None if entry is None or entry.comparer is None else entry.comparer()


def _entry(name: str | None, where: Path | str = "") -> SuiteEntry:
    entry = SUITES.get(str(name))
    if entry is None:
        raise CarebenchError(f"{where}: unknown suite {name!r} in manifest.json; known: {', '.join(SUITES)}")
    return entry


def rerender(run_dir: str | Path) -> dict[str, Any]:
    """``carebench report DIR``: metrics and report from the records alone."""
    from carebench.experiment import rerender as rerender_run
    from carebench.rundir import read_json

    run_dir = Path(run_dir)
    manifest = read_json(run_dir / "manifest.json")
    tool = TOOL_RUNS.get(str(manifest.get("suite")))
    if tool is not None:
        return rerender_run(run_dir, tool(), manifest=manifest)
    entry = _entry(manifest.get("suite"), run_dir / "manifest.json")
    return rerender_run(run_dir, entry.suite(), manifest=manifest)
