"""A command never writes over a run directory that is not its own: a compare or leaderboard
given one of its input runs as ``--out``, a run given another suite's directory, a re-score
given another run's. Each is one line, exit 2, and every file of the other run is unchanged
(compared by SHA-256 before and after)."""

from __future__ import annotations

import hashlib
import json

import pytest
from run_dirs import support_tasks, write_risk_run, write_support_run

from carebench.cli import main


def _tree(path):
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def runs(tmp_path):
    gold = {f"i{k}": k % 4 for k in range(12)}
    a = write_risk_run(tmp_path / "a", gold, {"m1": {i: (g + (i == "i3")) % 4 for i, g in gold.items()}},
                       rerender=True)
    b = write_risk_run(tmp_path / "b", gold, {"m2": {i: (g + (i in ("i1", "i5"))) % 4 for i, g in gold.items()}},
                       rerender=True)
    s = write_support_run(tmp_path / "s", support_tasks(3), ["openai:r1"], lambda *x: True, rerender=True)
    return a, b, s


def _refused(capsys, args, fragment):
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err


def test_compare_and_leaderboard_never_write_over_an_input_run(runs, capsys):
    a, b, _ = runs
    before = {p: _tree(p) for p in (a, b)}
    _refused(capsys, ["leaderboard", str(a), str(b), "--out", str(a), "--bootstrap", "20"], "holds a risk run")
    _refused(capsys, ["compare", str(a), str(b), "--out", str(b), "--bootstrap", "20"], "holds a risk run")
    assert {p: _tree(p) for p in (a, b)} == before
    out = a.parent / "lb"
    assert main(["leaderboard", str(a), str(b), "--out", str(out), "--bootstrap", "20"]) == 0
    assert main(["leaderboard", str(a), str(b), "--out", str(out), "--bootstrap", "20"]) == 0  # its own: again


def test_a_run_never_writes_into_another_suites_run(runs, capsys):
    _, _, s = runs
    before = _tree(s)
    _refused(capsys, ["risk", "run", "--data", "builtin:sample", "--method", "keyword", "--out", str(s),
                      "--no-cache"], "holds a support run")
    assert _tree(s) == before


def test_a_rescore_never_writes_into_another_run(runs, capsys):
    a, _, s = runs
    before = _tree(a)
    _refused(capsys, ["support", "rescore", str(s), "--out", str(a)], "is another run's directory")
    assert _tree(a) == before
    assert main(["support", "rescore", str(s), "--out", str(s.parent / "rescored")]) == 0
    assert main(["support", "rescore", str(s), "--out", str(s.parent / "rescored")]) == 0  # its own folder: again


@pytest.mark.parametrize("manifest", [[1, 2], {"status": "complete"}, "text"])
def test_report_on_a_manifest_that_is_no_run_s_is_one_line(tmp_path, capsys, manifest):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text(json.dumps(manifest))
    _refused(capsys, ["report", str(tmp_path / "x")], "is not a carebench manifest")
