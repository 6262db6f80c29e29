"""The shared run flags are declared once (``carebench.engine.options.run_flags``) and every
model-calling command exposes them alike; the decorator hands the command the built
``RunOptions``."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from carebench.engine.options import RUN_FLAG_VALUES, RUN_FLAGS, RunOptions, run_flags

SRC = Path(__file__).resolve().parents[1] / "src" / "carebench"

#: the shared flags, written out by hand (the reference the commands are checked against)
SHARED = {"--out", "--cache", "--no-cache", "--budget", "--dry-run", "--json", "--concurrency",
          "--model-option", "--timeout", "--batch", "--batch-format"}
#: every command that calls a model, with the shared flags it leaves out
MODEL_CALLING = {
    "risk run": set(), "risk sweep": set(),
    "support run": set(), "support calibrate": set(), "support coherence": set(), "support probe": set(),
    "plural calibrate": set(), "plural freeze": set(), "plural label": set(), "plural run": set(),
    "construct screen": set(), "construct route": set(), "construct rewrite": set(),
    "construct judge": set(), "construct build": set(),
    "converse run": set(), "converse judge": set(),
}


def _commands() -> dict:
    from carebench.cli import _mount_suites, app

    _mount_suites()  # every suite's commands (main() mounts only the one named)
    found: dict = {}

    def walk(cmd, path: list[str]) -> None:
        if hasattr(cmd, "commands"):  # a group
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            found[" ".join(path)] = cmd

    walk(typer.main.get_command(app), [])
    return found


def _describe(p) -> tuple:
    return (tuple(p.opts), tuple(p.secondary_opts), getattr(p, "help", None), repr(p.default),
            repr(getattr(p, "show_default", None)), repr(getattr(p, "min", None)), p.multiple,
            getattr(p, "is_flag", None), getattr(p.callback, "__name__", None))


def test_every_model_calling_command_has_the_same_run_flags():
    commands = _commands()
    reference: dict[str, tuple] = {}
    for path, missing in MODEL_CALLING.items():
        assert path in commands, f"no command {path!r}"
        params = {p.opts[0]: p for p in commands[path].params if p.opts and p.opts[0] in SHARED}
        assert set(params) == SHARED - missing, path
        for flag, p in params.items():
            # each flag is described identically (help, default, type) wherever it appears
            assert reference.setdefault(flag, _describe(p)) == _describe(p), (path, flag)
    assert set(reference) == SHARED


def test_no_module_declares_a_run_flag_itself():
    aliases = {"Out", "Cache", "NoCache", "Budget", "DryRun", "Concurrency", "ModelOption", "Timeout",
               "Batch", "BatchFormat"}
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "engine/options.py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.arg) and node.annotation is not None:
                names = {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
                # string annotations (from __future__ import annotations) parse as constants
                if isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str):
                    names |= {n.id for n in ast.walk(ast.parse(node.annotation.value)) if isinstance(n, ast.Name)}
                if names & aliases:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno} {node.arg}")
    assert offenders == []


def _toy_app():
    app = typer.Typer()
    seen: dict = {}

    @app.command("full")
    @run_flags()
    def full(name: Annotated[str, typer.Option()] = "x", options: RunOptions = RUN_FLAGS,
             values: dict = RUN_FLAG_VALUES, after: Annotated[int, typer.Option()] = 1) -> None:
        seen.update(name=name, options=options, values=values, after=after)

    @app.command("some")
    @run_flags(only=("out", "budget"), no_cache=True, progress=False,
               declare={"budget": Annotated[float | None, typer.Option(help="Accepted, unused.")]})
    def some(options: RunOptions = RUN_FLAGS) -> None:
        seen.update(options=options)

    return app, seen


def test_the_decorator_hands_over_the_built_options(tmp_path):
    app, seen = _toy_app()
    res = CliRunner().invoke(app, [
        "full", "--name", "n", "--after", "3", "--out", str(tmp_path / "o"), "--cache", str(tmp_path / "c.db"),
        "--budget", "2.5", "--concurrency", "3", "--timeout", "7", "--model-option", "openai:m:max_tokens=5",
        "--batch", str(tmp_path / "b"), "--batch-format", "vllm", "--dry-run", "--no-cache"])
    assert res.exit_code == 0, res.output
    o = seen["options"]
    assert (seen["name"], seen["after"]) == ("n", 3)
    assert o.out == tmp_path / "o" and o.cache_path == tmp_path / "c.db"
    assert (o.budget_usd, o.concurrency, o.timeout_s, o.dry_run, o.use_cache) == (2.5, 3, 7.0, True, False)
    assert o.model_options["openai:m"].max_tokens == 5
    assert o.batch.dir == tmp_path / "b" and o.batch.format == "vllm"
    assert seen["values"]["budget"] == 2.5 and seen["values"]["model_option"] == ["openai:m:max_tokens=5"]
    assert "json_out" not in seen["values"]

    res = CliRunner().invoke(app, ["full"])
    assert res.exit_code == 0, res.output
    o = seen["options"]
    assert (o.out, o.budget_usd, o.use_cache, o.timeout_s, o.concurrency, o.batch) == (None, None, True, 120.0,
                                                                                        None, None)


def test_a_subset_with_fixed_values_and_its_own_help(tmp_path):
    app, seen = _toy_app()
    cmd = typer.main.get_command(app).commands["some"]
    opts = {p.opts[0]: p for p in cmd.params}
    assert set(opts) == {"--out", "--budget"}
    assert opts["--budget"].help == "Accepted, unused."
    res = CliRunner().invoke(app, ["some", "--budget", "1", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    o = seen["options"]
    assert (o.out, o.budget_usd, o.use_cache, o.progress) == (tmp_path, 1.0, False, False)
    # a flag the subset leaves out is not accepted
    assert CliRunner().invoke(app, ["some", "--concurrency", "2"]).exit_code == 2


def test_bad_declarations_fail_at_import():
    with pytest.raises(TypeError, match="unknown run flags"):
        run_flags(only=("outt",))
    with pytest.raises(TypeError, match="RUN_FLAGS"):
        run_flags()(lambda name="x": None)
