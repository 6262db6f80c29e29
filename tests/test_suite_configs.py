"""Every command's config holds the shared run options as ``options: RunOptions``.

Read from the source with ``ast``: every class named ``*Config`` (and construct's
``ConstructOptions``) either declares ``options: RunOptions`` or is listed below with the
reason it needs none, so a new command config that re-declares ``--budget``,
``--cache``, ... (or forgets them) fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import carebench

PACKAGE = Path(carebench.__file__).resolve().parent

#: configs that are not a command's config (a part of one, or a command that calls no model)
NO_RUN = {
    "compare.command.CompareConfig": "compares finished run directories; makes no model call",
    "compare.leaderboard.LeaderboardConfig": "ranks finished run directories; makes no model call",
    "construct.config.BuildConfig": "the build file's settings; the command's run is ConstructOptions.options",
    "construct.quality.ConfigSummary": "a summary row, not a config",
    "construct.review.ReviewSampleConfig": "settings of one construct step",
    "construct.rewriting.RewriterConfig": "settings of one construct step",
    "construct.screening.ScreenConfig": "settings of one construct step",
    "converse.generation.GenerationConfig": "settings of the generation step inside ConverseConfig",
    "plural.responses.ResponseConfig": "settings of the response step inside PluralRunConfig",
    "plural.sample.PolicySampleConfig": "settings of the sample draw inside SampleRunConfig",
    "engine.runner.RunnerConfig": "the runner's own settings, built by the run context",
    "support.generation.GenerationConfig": "settings of the generation step inside SupportRunConfig",
    "view.build.ViewConfig": "builds a page from finished run directories; makes no model call",
}
#: command configs that must hold ``run`` (at least these: the walk below must find them)
COMMAND_CONFIGS = {
    "converse.suite.ConverseConfig", "risk.config.RunConfig", "support.config.SupportRunConfig",
    "support.suite.JudgeCalibrationConfig", "support.coherence.CoherenceConfig", "support.probe.ProbeConfig",
    "plural.config.PluralRunConfig", "plural.config.SampleRunConfig",
    "plural.calibration.ProfileCalibrationConfig", "plural.release.FreezeConfig", "plural.release.LabelConfig",
    "plural.agreement.AgreementConfig", "construct.command.ConstructOptions",
}


def _configs() -> dict[str, ast.ClassDef]:
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(p.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.parse(p.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and ("Config" in node.name or node.name == "ConstructOptions"):
                out[f"{module}.{node.name}"] = node
    return out


def _holds_run(cls: ast.ClassDef, classes: dict[str, ast.ClassDef]) -> bool:
    for n in cls.body:
        if (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "options"
                and ast.unparse(n.annotation) == "RunOptions"):
            return True
    # a base class declared in the package (e.g. plural's CommandOptions) may hold it
    bases = [ast.unparse(b) for b in cls.bases]
    return any(_holds_run(c, classes) for name, c in classes.items() if c.name in bases)


def test_every_command_config_holds_run_options():
    configs = _configs()
    every_class = {f"{'.'.join(p.relative_to(PACKAGE).with_suffix('').parts)}.{n.name}": n
                   for p in PACKAGE.rglob("*.py") for n in ast.parse(p.read_text(encoding="utf-8")).body
                   if isinstance(n, ast.ClassDef)}
    assert COMMAND_CONFIGS <= set(configs), sorted(COMMAND_CONFIGS - set(configs))
    assert set(NO_RUN) <= set(configs), sorted(set(NO_RUN) - set(configs))  # the list is not stale
    lacking = sorted(name for name, cls in configs.items()
                     if name not in NO_RUN and not _holds_run(cls, every_class))
    assert lacking == []
    assert not any(_holds_run(configs[name], every_class) for name in NO_RUN)  # exempt ones really lack it


def test_the_check_tells_a_config_with_run_from_one_without():
    with_run = ast.parse("class AConfig:\n    x: int = 1\n    options: RunOptions = field(default_factory=run_options)\n")
    without = ast.parse("class BConfig:\n    budget_usd: float | None = None\n    out: str | None = None\n")
    derived = ast.parse("class CConfig(AConfig):\n    y: int = 2\n")
    classes = {"m.AConfig": with_run.body[0], "m.BConfig": without.body[0], "m.CConfig": derived.body[0]}
    assert _holds_run(with_run.body[0], classes)
    assert not _holds_run(without.body[0], classes)
    assert _holds_run(derived.body[0], classes)
