"""Every model and embedding call goes through the run context (``Run.calls``).

Only ``carebench/engine/run.py`` (the run context) and ``carebench/engine/runner.py`` may drive the
runner: a module that calls ``run_sync``/``Runner.run``, builds a ``Runner`` or reaches
for a run's ``.runner`` bypasses the run's stage accounting (``by_stage``), and a
private runner also bypasses its budget and ``calls.jsonl``. Read from the source with
``ast``, so a use inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import carebench

PACKAGE = Path(carebench.__file__).resolve().parent
#: the run context and the runner itself
OWNERS = {PACKAGE / "engine/run.py", PACKAGE / "engine/runner.py"}


def _is_anyio_thread(node: ast.expr) -> bool:
    """``anyio.to_thread`` / ``to_thread``: anyio's own ``run_sync`` (a thread), not the runner's."""
    return (isinstance(node, ast.Attribute) and node.attr == "to_thread"
            or isinstance(node, ast.Name) and node.id == "to_thread")


def runner_uses(source: str) -> list[str]:
    """What in ``source`` drives the runner directly, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "Runner" or isinstance(f, ast.Attribute) and f.attr == "Runner":
                what = "builds a Runner"
            elif isinstance(f, ast.Attribute) and f.attr == "run_sync" and not _is_anyio_thread(f.value):
                what = "calls run_sync"
            elif (isinstance(f, ast.Attribute) and f.attr == "run"
                  and (isinstance(f.value, ast.Name) and f.value.id in ("Runner", "runner")
                       or isinstance(f.value, ast.Attribute) and f.value.attr == "runner")):
                what = "calls Runner.run"
        elif isinstance(node, ast.Attribute) and node.attr == "runner" and isinstance(node.ctx, ast.Load):
            what = "reaches for a run's .runner"
        elif isinstance(node, ast.ImportFrom) and any(a.name == "Runner" for a in node.names):
            what = "imports Runner"
        if what is not None:
            found.append((node.lineno, node.col_offset, what))
    return [f"{line}: {what}" for line, _, what in sorted(found)]


def test_the_checker_sees_each_kind_of_bypass():
    planted = (
        "from carebench.engine.runner import Call, Runner, RunnerConfig\n"
        "def f(run, calls):\n"
        "    r = Runner(RunnerConfig())\n"
        "    r.run_sync(calls)\n"
        "    run.runner.config.max_retries = 1\n"
        "    return runner.run(calls)\n"
    )
    assert [u.split(": ", 1)[1] for u in runner_uses(planted)] == [
        "imports Runner", "builds a Runner", "calls run_sync", "reaches for a run's .runner", "calls Runner.run"]
    assert runner_uses("def g(run, calls):\n    return run.calls(calls, 'x', stage='s')\n") == []
    # anyio's thread helper of the same name is not the runner (the Inspect bridge uses it)
    assert runner_uses("import anyio.to_thread\nasync def h(f):\n    return await anyio.to_thread.run_sync(f)\n") == []


def test_only_the_run_and_the_runner_drive_the_runner():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100  # the walk found the package
    bypasses = {str(p.relative_to(PACKAGE.parent)): uses for p in modules if p not in OWNERS
                if (uses := runner_uses(p.read_text(encoding="utf-8")))}
    assert bypasses == {}
