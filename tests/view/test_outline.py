"""Outlines (``comparison.json``): written by every comparable run, trusted only while the run
directory is unchanged, and leaderboards built from them equal those read from every run in full.

References: the suite's comparer reading the whole run (the code ``carebench compare`` uses),
``carebench leaderboard``'s own build over the same runs, and macro-F1 from records.jsonl with
scikit-learn."""

from __future__ import annotations

import json
import os
import shutil

from sklearn.metrics import f1_score

from carebench.compare.leaderboard import LeaderboardConfig, build_leaderboard
from carebench.compare.outline import OUTLINE, read_outline
from carebench.suites import comparer
from carebench.view import ViewConfig, build_view
from view.view_runs import counting_comparers


def _canon(x):
    return json.dumps(x, sort_keys=True, default=str)


def test_every_comparable_run_of_the_demo_and_the_cli_writes_an_outline_matching_a_full_read(demo_site):
    folder = demo_site[0]
    checked = set()
    for m in sorted(folder.rglob("manifest.json")):
        run = m.parent
        manifest = json.loads(m.read_text("utf-8"))
        c = comparer(manifest.get("suite", ""))
        if c is None or manifest.get("kind") not in (None, "run") or run == folder / "support":
            continue  # not comparable, or the fixture's support run, written by hand without the run skeleton
        assert (run / OUTLINE).is_file(), run
        light, full = read_outline(run, manifest), c.read(run, manifest)
        assert light is not None, run
        assert _canon(light.keys) == _canon(full.keys)
        assert {n: (s.model, s.local) for n, s in light.systems.items()} == \
            {n: (s.model, s.local) for n, s in full.systems.items()}
        assert light.clusters == full.clusters and light.unit == full.unit
        checked.add(manifest["suite"])
    # the demo's parts and the risk runs made with the CLI
    assert {"risk", "support", "plural", "converse"} <= checked


def _macro_f1(run_dir, method):
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in recs if r["method"] == method]
    return f1_score([r["gold"] for r in rows], [r["pred"] for r in rows], average="macro", labels=[0, 1, 2, 3])


def _rows(board):
    return [(r["system"], r["value"], r["ci"], r["band"], os.path.basename(r["run"])) for r in board["rows"]]


def test_only_the_runs_a_leaderboard_keeps_are_read_and_the_board_equals_the_leaderboards(built, tmp_path):
    runs = built[1]
    folder = tmp_path / "runs"
    # the same tfidf-lr run twice (a, then b: b is taken, as the newer or, created in the same
    # second, the later), and tfidf-ordinal once; copies keep the files' times, so the outlines hold
    for name, src in (("a-lr", "risk-lr"), ("b-lr", "risk-lr"), ("c-ord", "risk-ord")):
        shutil.copytree(runs[src], folder / name)
    reads: list[str] = []
    res = build_view(ViewConfig([str(folder)], out=str(tmp_path / "site"), B=200), counting_comparers(reads))
    assert sorted(reads) == ["b-lr", "c-ord"]  # a-lr is grouped from its outline and never scored
    (risk,) = [sb for sb in res.boards if sb.suite == "risk"]
    (board,) = risk.boards
    ref = build_leaderboard(LeaderboardConfig([str(folder / n) for n in ("a-lr", "b-lr", "c-ord")],
                                              prefer="newest", B=200), comparer)
    assert [_rows(b) for b in board["boards"]] == [_rows(b) for b in ref["boards"]]
    assert [r["included"] for r in board["runs"]] == [True, True, True]
    assert board["duplicates"] == ref["duplicates"] and board["banners"] == ref["banners"]
    macro = next(b for b in board["boards"] if b["metric"] == "macro_f1")
    got = {r["system"]: r["value"] for r in macro["rows"]}
    assert abs(got["tfidf-lr"] - _macro_f1(folder / "b-lr", "tfidf-lr")) < 1e-12
    assert abs(got["tfidf-ordinal"] - _macro_f1(folder / "c-ord", "tfidf-ordinal")) < 1e-12


def test_an_outline_is_ignored_once_the_run_directory_changes(built, tmp_path):
    runs = built[1]
    folder = tmp_path / "runs"
    for name, src in (("a-lr", "risk-lr"), ("b-lr", "risk-lr"), ("c-ord", "risk-ord")):
        shutil.copytree(runs[src], folder / name)
    # a-lr's records now hold another method: an outline trusted after this would hide it
    path = folder / "a-lr" / "records.jsonl"
    recs = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
    for r in recs:
        if r["method"] == "tfidf-lr":
            r["method"] = "tfidf-renamed"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), "utf-8")
    (folder / "a-lr" / "records.parquet").unlink(missing_ok=True)
    assert read_outline(folder / "a-lr", json.loads((folder / "a-lr" / "manifest.json").read_text())) is None
    reads: list[str] = []
    res = build_view(ViewConfig([str(folder)], out=str(tmp_path / "site"), B=200), counting_comparers(reads))
    assert sorted(reads) == ["a-lr", "b-lr", "c-ord"]
    (board,) = next(sb for sb in res.boards if sb.suite == "risk").boards
    macro = next(b for b in board["boards"] if b["metric"] == "macro_f1")
    assert {r["system"] for r in macro["rows"]} == {"tfidf-renamed", "tfidf-lr", "tfidf-ordinal"}


def test_an_outline_is_trusted_while_the_run_is_unchanged(built, tmp_path):
    """The other side of the check: an outline that still matches is used as it is (here one
    edited by hand to name a system the records do not hold, which only the outline can show)."""
    runs = built[1]
    folder = tmp_path / "runs"
    for name, src in (("a-lr", "risk-lr"), ("b-lr", "risk-lr"), ("c-ord", "risk-ord")):
        shutil.copytree(runs[src], folder / name)
    o = folder / "a-lr" / OUTLINE
    data = json.loads(o.read_text("utf-8"))
    data["systems"]["only-in-the-outline"] = {"model": None, "local": None}
    o.write_text(json.dumps(data), "utf-8")
    light = read_outline(folder / "a-lr", json.loads((folder / "a-lr" / "manifest.json").read_text()))
    assert light is not None and "only-in-the-outline" in light.systems
