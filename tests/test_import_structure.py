"""The package's import shape (issue "One run, one ledger"): no suite imports another,
no core module imports a suite (only the suite table does), and no module-level
import circle. Read from the source with ``ast``, so a lazy import inside a function
counts for the boundaries too."""

from __future__ import annotations

import ast
from pathlib import Path

import carebench
from carebench import suites as suite_table

SRC = Path(carebench.__file__).resolve().parent.parent
#: the suites of the suite table, and annotate (a tool kept to the same boundaries)
SUITES = {e.package.split(".")[1] for e in suite_table.SUITES.values()} | {"annotate"}
#: the one core module allowed to know the suites: the explicit table the CLI dispatches through
SUITE_TABLE = {"carebench.suites"}


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for p in (SRC / "carebench").rglob("*.py"):
        parts = list(p.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def _targets(name: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, mods) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = name.split(".") if is_pkg else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix] + [f"{prefix}.{a.name}" for a in node.names if f"{prefix}.{a.name}" in mods]


def _kept(name: str, is_pkg: bool, nodes, mods) -> set[str]:
    return {t for n in nodes if isinstance(n, ast.Import | ast.ImportFrom)
            for t in _targets(name, is_pkg, n, mods) if t in mods}


def _imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(every carebench import of each module, its module-level ones)."""
    mods = _modules()
    every, top = {}, {}
    for name, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        every[name] = _kept(name, is_pkg, ast.walk(tree), mods)
        top[name] = _kept(name, is_pkg, tree.body, mods)
    # the suite table imports what it names when it is used (import strings, unseen by ast)
    named = [t for e in suite_table.SUITES.values() for t in e.modules()]
    named += [t.module for t in (*suite_table.TOOLS.values(), *suite_table.TOOL_RUNS.values())]
    assert set(named) <= set(mods), sorted(set(named) - set(mods))
    every[suite_table.__name__] |= set(named)
    return every, top


def _suite(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SUITES else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_suite_imports_another_and_the_core_imports_none():
    every, _ = _imports()
    assert len(every) > 100  # the walk found the package
    crossings = sorted((m, t) for m, ts in every.items() for t in ts
                       if _suite(t) and _suite(t) != _suite(m) and m not in SUITE_TABLE)
    assert crossings == []


def test_no_module_level_import_circle():
    _, top = _imports()
    graph = {m: {t for t in ts if t != m} for m, ts in top.items()}
    assert _cycles(graph) == []


def test_no_import_circle_counting_lazy_imports():
    """A function-local import hides a circle from Python, not from a reader: a module
    that imports another which imports it back (even inside a function) cannot be
    understood, tested or moved alone."""
    every, _ = _imports()
    graph = {m: {t for t in ts if t != m} for m, ts in every.items()}
    assert _cycles(graph) == []
