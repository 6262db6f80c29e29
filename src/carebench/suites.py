"""The suite table: everything the application needs to know about a suite, in one entry.

An entry names the suite's modules as ``"package.module:attribute"`` strings, imported
only when used: its Typer app (mounted as ``carebench <suite>``), the class that
re-renders each kind of run directory it writes (``carebench report DIR`` picks it by the
manifest's ``suite`` and ``kind``), its comparer with the option that pairs differently
named systems and the metrics gated by default (``carebench compare``, ``leaderboard``),
and its part of ``carebench demo``. The CLI, ``carebench report``, ``compare``, the demo
and the structure tests read this table and nothing else, so a new suite is one entry
here; a renamed module fails loudly instead of silently dropping a suite. This module and
the CLI are the application layer: the only places that reach every suite.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from carebench.types import CarebenchError


class Target(str):
    """A ``"package.module:attribute"`` string; calling it imports the module and returns
    the attribute (a suite is imported only when one of its parts is used)."""

    __slots__ = ()

    @property
    def module(self) -> str:
        return self.partition(":")[0]

    def __call__(self) -> Any:
        module, _, attr = self.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
        return obj


def _target(value: Any) -> Any:
    """An import string as a :class:`Target`; a callable (e.g. a test's stand-in) as it is."""
    return Target(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class SuiteEntry:
    """One suite: see the module docstring. ``kinds`` maps a manifest's ``kind`` (None: a
    run that records none) to the class re-rendering it, built without arguments. Each
    target is an import string, or a callable returning what the string would name."""

    help: str
    app: Target
    kinds: Mapping[str | None, Target]
    #: run_demo(run_dir, model_spec=, quick=) of the suite's part of ``carebench demo``
    demo: Target | None = None
    #: a carebench.compare.measures.Comparer class (None: the suite's runs are not compared)
    comparer: Target | None = None
    #: compare's option pairing differently named systems, and what it pairs (for its help)
    pair_option: str | None = None
    pair_help: str = ""
    #: the measures (globs) ``carebench compare`` gates when no --gate is given
    gates: tuple[str, ...] = ()
    #: the suite's Inspect task (``inspect eval carebench/<suite>``, registered by
    #: ``carebench._registry``); its module imports inspect_ai, so only the extra loads it
    inspect_task: Target | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "app", _target(self.app))
        object.__setattr__(self, "kinds", {k: _target(v) for k, v in self.kinds.items()})
        for name in ("comparer", "demo", "inspect_task"):
            object.__setattr__(self, name, _target(getattr(self, name)))

    def modules(self) -> list[str]:
        """Every module the entry names (what the suite table imports of the suite)."""
        named = [self.app, *self.kinds.values(), self.comparer, self.demo, self.inspect_task]
        return sorted({t.module for t in named if isinstance(t, Target)})

    @property
    def package(self) -> str:
        """The suite's package (its app's, e.g. ``carebench.risk``)."""
        return self.app.module.rpartition(".")[0]


SUITES: dict[str, SuiteEntry] = {
    "risk": SuiteEntry(
        "graded risk measurement (Beyond the Flag)",
        app="carebench.risk.cli:app",
        kinds={None: "carebench.risk.suite:RiskSuite", "sweep": "carebench.risk.suite:RiskSuite"},
        comparer="carebench.risk.compare:RiskComparer",
        pair_option="--method", pair_help="pair BASE_NAME=CANDIDATE_NAME methods", gates=("macro_f1", "qwk"),
        demo="carebench.risk.demo:run_demo", inspect_task="carebench.risk.inspect_task:risk"),
    "support": SuiteEntry(
        "rubric-scored crisis support (DistressBench)",
        app="carebench.support.cli:app",
        kinds={None: "carebench.support.suite:SupportSuite",
               "calibration": "carebench.support.suite:JudgeCalibrationSuite",
               "coherence": "carebench.support.coherence:CoherenceSuite",
               "probe": "carebench.support.probe:ProbeSuite"},
        comparer="carebench.support.compare:SupportComparer",
        pair_option="--responder", pair_help="pair BASE=CANDIDATE responders",
        gates=("score", "routing:local", "routing:wrong_region", "unknown_number", "over_referral"),
        demo="carebench.support.demo:run_demo", inspect_task="carebench.support.inspect_task:support"),
    "plural": SuiteEntry(
        "practitioner-calibrated reference policies and jury scoring (VEILED-SH)",
        app="carebench.plural.cli:app",
        kinds={kind: f"carebench.plural.commands.{kind}:{kind.capitalize()}Command"
               for kind in ("run", "sample", "calibrate", "freeze", "label", "agreement")},
        comparer="carebench.plural.compare:PluralComparer",
        pair_option="--system", pair_help="pair BASE=CANDIDATE systems", gates=("full:*", "routing:local", "routing:wrong_region", "unknown_number"),
        demo="carebench.plural.demo:run_demo"),
    "construct": SuiteEntry(
        "dataset construction (VEILED-SH §4)",
        app="carebench.construct.cli:app",
        kinds={kind: "carebench.construct.suite:ConstructSuite"
               for kind in ("build", "screen", "route", "rewrite", "judge", "select", "anonymize",
                            "review-sample", "review-stats")}),
    "converse": SuiteEntry(
        "simulated conversations judged with decision-tree rubrics (VERA-MH)",
        app="carebench.converse.cli:app",
        kinds={None: "carebench.converse.suite:ConverseSuite", "import": "carebench.converse.suite:ConverseSuite",
               "calibration": "carebench.converse.calibration_run:ConverseCalibrationSuite"},
        comparer="carebench.converse.compare:ConverseComparer",
        pair_option="--system", pair_help="pair BASE=CANDIDATE chatbots",
        gates=("score", "routing:local", "routing:wrong_region", "unknown_number", "over_referral"),
        demo="carebench.converse.demo:run_demo", inspect_task="carebench.converse.inspect_task:converse"),
}

#: tools beside the suites, mounted the same way
TOOLS: dict[str, Target] = {"annotate": Target("carebench.annotate.cli:app"),
                            "batch": Target("carebench.batch.cli:app"),
                            "resources": Target("carebench.resources.cli:app"),
                            # Inspect logs (the inspect extra): carebench export inspect / import inspect
                            "export": Target("carebench.inspect.cli:export_app"),
                            "import": Target("carebench.inspect.cli:import_app")}

#: directories written by the core tools (``carebench compare``, ``carebench leaderboard``),
#: re-rendered by ``carebench report DIR`` like a suite's runs
TOOL_RUNS: dict[str, Target] = {"compare": Target("carebench.compare.suite:CompareSuite"),
                                "leaderboard": Target("carebench.compare.suite:LeaderboardSuite")}


def suite_of(name: Any, kind: Any = None, where: Path | str = "") -> Any:
    """The object re-rendering suite ``name``'s run of ``kind`` (configless: it scores and renders)."""
    entry_ = SUITES.get(name) if isinstance(name, str) else None
    if entry_ is None:
        raise CarebenchError(f"{where}: unknown suite {name!r} in manifest.json; known: {', '.join(SUITES)}")
    target = entry_.kinds.get(kind) if kind is None or isinstance(kind, str) else None
    if target is None:
        raise CarebenchError(f"no {name} report for run kind {kind!r} (manifest.json)")
    return target()()


def comparer(name: str) -> Any:
    """The comparer of suite ``name``, with its pair option and default gates (None when its
    runs cannot be compared)."""
    entry_ = SUITES.get(str(name))
    if entry_ is None or entry_.comparer is None:
        return None
    obj = entry_.comparer()()
    obj.pair_option, obj.default_gates = entry_.pair_option, entry_.gates
    return obj


def pair_options() -> dict[str, str]:
    """``carebench compare``'s pairing options with their help, from the table (in its order)."""
    helps: dict[str, list[str]] = {}
    for name, e in SUITES.items():
        if e.pair_option:
            helps.setdefault(e.pair_option, []).append(f"{name}: {e.pair_help}")
    return {option: "; ".join(parts) + "." for option, parts in helps.items()}


def default_gates_text() -> str:
    """What ``carebench compare`` gates with no --gate, per suite (for its help)."""
    return ", ".join(f"{name} {' and '.join(e.gates)}" for name, e in SUITES.items() if e.gates)


def rerender(run_dir: str | Path) -> dict[str, Any]:
    """``carebench report DIR``: metrics and report from the records alone."""
    from carebench.engine.rundir import read_manifest
    from carebench.engine.skeleton import rerender as rerender_run

    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    tool = TOOL_RUNS.get(str(manifest.get("suite")))
    if tool is not None:
        return rerender_run(run_dir, tool()(), manifest=manifest)
    suite = suite_of(manifest.get("suite"), manifest.get("kind"), run_dir / "manifest.json")
    return rerender_run(run_dir, suite, manifest=manifest)
