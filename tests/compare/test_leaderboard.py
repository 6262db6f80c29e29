"""`carebench leaderboard`: five responders run as 2 + 2 + 1 equal one run of all five.

The reference is the single run's own ``metrics.json`` leaderboard, computed by the
support suite's analyses (DistressBench §4.1/E.1), not by the leaderboard code.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest
from run_dirs import support_tasks, write_risk_run, write_support_run

from carebench.cli import main

RESPONDERS = [f"openai:model-{k}" for k in range(5)]
SKILL = dict(zip(RESPONDERS, (230, 200, 195, 150, 90), strict=True))


def met(r, t, a, c, j):
    return hashlib.sha256(f"{r}|{t}|{a}|{c}|{j}".encode()).digest()[0] < SKILL[r]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("lb")
    tasks = support_tasks(30)
    one = write_support_run(d / "all", tasks, RESPONDERS, met, attempts=2, rerender=True)
    parts = [write_support_run(d / f"part{k}", tasks, group, met, attempts=2,
                               created=f"2026-01-0{k + 1}T00:00:00+00:00")
             for k, group in enumerate((RESPONDERS[:2], RESPONDERS[2:4], RESPONDERS[4:]))]
    return d, tasks, one, parts


def _board(out):
    m = json.loads((out / "metrics.json").read_text())
    return m, m["boards"][0]


def test_three_runs_on_different_days_equal_one_run_of_all_five(runs, capsys):
    d, _, one, parts = runs
    out = d / "lb"
    assert main(["leaderboard", *map(str, parts), "--out", str(out), "--bootstrap", "200"]) == 0
    _m, board = _board(out)
    ref = json.loads((one / "metrics.json").read_text())["leaderboard"]
    assert board["n_common_units"] == ref["n_common_tasks"] == 30
    assert [r["system"] for r in board["rows"]] == [r["responder"] for r in ref["rows"]]
    for mine, theirs in zip(board["rows"], ref["rows"], strict=True):
        assert mine["value"] == pytest.approx(theirs["score"], abs=1e-12)
        assert mine["ci"] == pytest.approx(theirs["ci"], abs=1e-12)
        assert mine["band"] == theirs["band"]
    assert [b["members"] for b in board["bands"]] == [b["members"] for b in ref["bands"]]
    assert [(g["upper"], g["lower"], g["separated"]) for g in board["gaps"]] == \
        [(g["upper"], g["lower"], g["separated"]) for g in ref["gaps"]]
    for mine, theirs in zip(board["gaps"], ref["gaps"], strict=True):
        assert mine["ci"] == pytest.approx(theirs["ci"], abs=1e-12)
    assert 0 < board["n_separated"] < len(board["gaps"])  # the case tells bands apart, not trivially
    # the merged leaderboard equals the one-run leaderboard run through the same tool
    assert main(["leaderboard", str(one), "--out", str(d / "lb1"), "--bootstrap", "200"]) == 0
    _, single = _board(d / "lb1")
    assert [(r["system"], r["band"]) for r in single["rows"]] == [(r["system"], r["band"]) for r in board["rows"]]
    # leaderboard.csv holds the same rows
    rows = list(csv.DictReader(io.StringIO((out / "leaderboard.csv").read_text())))
    assert [(r["system"], int(r["band"])) for r in rows] == [(r["system"], r["band"]) for r in board["rows"]]
    assert float(rows[0]["value"]) == board["rows"][0]["value"]
    html = (out / "report.html").read_text()
    assert "sortable" in html and "band" in html


def test_a_run_on_different_tasks_is_excluded_with_its_reason(runs, capsys):
    d, _tasks, _, parts = runs
    other = write_support_run(d / "other", support_tasks(31), ["openai:model-x"], lambda *a: True)
    out = d / "lb-ex"
    assert main(["leaderboard", *map(str, parts), str(other), "--out", str(out), "--bootstrap", "200"]) == 0
    printed = capsys.readouterr().out
    assert f"excluded {other}" in printed and "tasks" in printed
    m, board = _board(out)
    entry = next(r for r in m["runs"] if r["path"] == str(other))
    assert not entry["included"] and "tasks" in entry["reason"] and "criteria" in entry["reason"]
    assert "openai:model-x" not in [r["system"] for r in board["rows"]]
    assert "1 run(s) excluded" in (out / "report.md").read_text()


def test_the_same_system_in_two_runs_is_never_averaged(runs, capsys):
    d, tasks, one, parts = runs
    # refused without --prefer, naming the system
    rc = main(["leaderboard", str(parts[0]), str(one), "--out", str(d / "dup")])
    err = capsys.readouterr().err
    assert rc == 2 and "openai:model-0 is in 2 runs" in err and "--prefer" in err
    # a newer run of model-0 that is much worse: --prefer newest takes it, --prefer oldest does not
    newer = write_support_run(d / "newer", tasks, [RESPONDERS[0]], lambda *a: False, attempts=2,
                              created="2026-02-01T00:00:00+00:00")
    for rule, expect in (("newest", newer), ("oldest", parts[0])):
        out = d / f"dup-{rule}"
        assert main(["leaderboard", str(parts[0]), str(newer), "--prefer", rule, "--out", str(out),
                     "--bootstrap", "100"]) == 0
        m, board = _board(out)
        row = next(r for r in board["rows"] if r["system"] == RESPONDERS[0])
        assert row["run"] == str(expect)
        assert m["duplicates"][0]["chosen"] == str(expect)
        assert (row["value"] == 0.0) if expect == newer else (row["value"] > 0.7)
    assert "never averaged" in (d / "dup-newest" / "report.md").read_text()


def test_risk_leaderboard_ranks_methods_by_macro_f1(tmp_path, capsys):
    gold = {f"i{k:02d}": k % 4 for k in range(24)}
    perfect = dict(gold)
    half = {i: (g if int(i[1:]) % 2 else 0) for i, g in gold.items()}
    a = write_risk_run(tmp_path / "a", gold, {"perfect": perfect})
    b = write_risk_run(tmp_path / "b", gold, {"half": half})
    assert main(["leaderboard", str(a), str(b), "--out", str(tmp_path / "lb"), "--bootstrap", "200"]) == 0
    _, board = _board(tmp_path / "lb")
    assert board["metric"] == "macro_f1"
    # a system's full name: its method and the model its records hold
    assert [r["system"] for r in board["rows"]] == ["perfect@openai:perfect", "half@openai:half"]
    assert board["rows"][0]["value"] == 1.0
    assert board["gaps"][0]["separated"] is True
