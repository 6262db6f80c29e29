"""carebench.stats depends on numpy/scipy only (DESIGN.md "Pure statistics")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import carebench.stats

STATS_DIR = Path(carebench.stats.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_stats_imports_only_numpy_scipy_stdlib_and_itself():
    files = sorted(STATS_DIR.glob("*.py"))
    assert len(files) >= 8
    for path in files:
        for mod in _imports(path):
            top = mod.split(".")[0]
            if top == "carebench":
                assert mod.startswith("carebench.stats"), (path.name, mod)
            else:
                assert top in {"numpy", "scipy"} or top in sys.stdlib_module_names, (path.name, mod)


def test_importing_stats_does_not_load_sklearn_or_other_carebench_modules():
    code = (
        "import sys, carebench.stats; "
        "bad = [m for m in sys.modules if m.startswith('sklearn') or "
        "(m.startswith('carebench.') and not m.startswith('carebench.stats'))]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
