"""The run directories and the built page shared by the view tests (made once: the risk runs take seconds)."""

from __future__ import annotations

import pytest

from carebench.cli import main
from view.view_runs import make_runs


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """(root, runs by name, the page's folder, the page's HTML)."""
    root = tmp_path_factory.mktemp("view")
    runs = make_runs(root, root / "c.sqlite")
    out = root / "site"
    assert main(["view", str(root / "runs"), "--out", str(out), "--bootstrap", "200"]) == 0
    return root, runs, out, (out / "index.html").read_text("utf-8")
