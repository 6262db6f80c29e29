"""The run directories and the built page shared by the view tests (made once: the risk runs take seconds)."""

from __future__ import annotations

import shutil

import pytest

from carebench.cli import main
from view.view_runs import make_demo, make_runs


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """(root, runs by name, the page's folder, the page's HTML)."""
    root = tmp_path_factory.mktemp("view")
    runs = make_runs(root, root / "c.sqlite")
    out = root / "site"
    assert main(["view", str(root / "runs"), "--out", str(out), "--bootstrap", "200"]) == 0
    return root, runs, out, (out / "index.html").read_text("utf-8")


@pytest.fixture(scope="session")
def demo_site(built, tmp_path_factory):
    """The demo plus three runs (the two risk runs and the support run) and the page built over
    them: (the folder of runs, the run directories by name, the page's folder)."""
    runs = built[1]
    root = tmp_path_factory.mktemp("view-demo")
    folder = root / "runs"
    picked = {name: shutil.copytree(runs[name], folder / name) for name in ("risk-lr", "risk-ord", "support")}
    picked["demo"] = make_demo(folder / "demo", root / "c.sqlite")
    out = root / "site"
    assert main(["view", str(folder), "--out", str(out), "--bootstrap", "200"]) == 0
    return folder, picked, out
