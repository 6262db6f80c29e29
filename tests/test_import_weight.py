"""Heavy imports stay off the paths that do not need them.

Why: ``carebench support rescore`` on a paper-size run has a budget of seconds, and
importing every suite (risk pulls in the sweep), ``scipy.stats`` (0.6-0.9 s), pandas
(0.2 s), aiohttp or matplotlib's drawing modules cost a third of it. These checks run in a fresh interpreter, so what
other tests imported does not hide a regression.
"""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_a_suite_command_imports_only_that_suite():
    mods = _modules_after("from carebench.cli import main\n"
                          "try:\n    main(['support', 'rescore', '--help'])\nexcept SystemExit:\n    pass")
    assert "carebench.support.cli" in mods
    assert not {m for m in mods if m.split(".")[:2] in (["carebench", "risk"], ["carebench", "plural"],
                                                         ["carebench", "construct"], ["carebench", "annotate"],
                                                         ["carebench", "converse"])}


def test_the_top_level_help_still_lists_every_suite():
    out = subprocess.run([sys.executable, "-m", "carebench", "--help"], check=False, capture_output=True, text=True)
    assert out.returncode == 0
    for name in ("risk", "support", "plural", "construct", "converse", "annotate", "demo", "report"):
        assert f" {name} " in out.stdout


def test_support_rescoring_modules_import_no_library_they_do_not_use():
    mods = _modules_after("import carebench.support.config, carebench.support.analyses, "
                          "carebench.support.report, carebench.stats, carebench.engine.skeleton")
    assert "carebench.support.analyses" in mods
    assert "scipy.stats" not in mods
    assert "pandas" not in mods
    assert "aiohttp" not in mods  # the HTTP client: no model is called when re-scoring
    assert "matplotlib.figure" not in mods  # loaded only when a chart is actually drawn
    assert "jinja2" not in mods  # reports are assembled with markupsafe; only annotate uses templates


def test_a_chart_still_draws_when_matplotlib_is_loaded_late():
    mods = _modules_after("from carebench.report import bar_chart\n"
                          "assert bar_chart(['a'], {'s': [1.0]}, 't', 'y')[:4] == b'\\x89PNG'")
    assert "matplotlib.figure" in mods


def _imports_inspect_ai(path) -> bool:
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "inspect_ai" or n.startswith("inspect_ai.") for n in names):
            return True
    return False


def test_only_the_inspect_adapters_import_inspect_ai():
    """UK AISI's Inspect is an optional extra: only ``carebench.inspect`` and a suite's
    ``inspect_*`` modules may import it (lazily counted too), and the core reaches those only
    through the suite table or inside the command that needs them."""
    from pathlib import Path

    import carebench

    root = Path(carebench.__file__).resolve().parent
    importing = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if _imports_inspect_ai(p))
    assert importing, "the walk found no Inspect adapter"
    outside = [p for p in importing if not (p.startswith("inspect/") or Path(p).name.startswith("inspect_"))]
    assert outside == []


def test_no_command_or_suite_loads_inspect_ai():
    mods = _modules_after("import carebench, carebench.suites, carebench.inspect\n"
                          "from carebench.cli import main\n"
                          "for argv in (['--help'], ['risk', 'run', '--help'], ['export', 'inspect', '--help'],\n"
                          "             ['import', 'inspect', '--help']):\n"
                          "    try:\n        main(argv)\n    except SystemExit:\n        pass")
    assert "carebench.cli" in mods and "carebench.inspect" in mods
    assert not {m for m in mods if m == "inspect_ai" or m.startswith("inspect_ai.")}
