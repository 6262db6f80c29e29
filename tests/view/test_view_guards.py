"""What a user can get wrong around ``carebench view``, and what the view must never do:
a damaged metrics file hides no other run, a carried banner never outlives its source, the
view never writes into a run directory, and ``--serve`` serves the page and the runs only."""

from __future__ import annotations

import json
import shutil

import pytest

from carebench.cli import main
from carebench.view import ViewConfig, build_view
from file_tree import tree_hashes


@pytest.fixture
def two_risk_runs(built, tmp_path):
    folder = tmp_path / "runs"
    for name in ("risk-lr", "risk-ord"):
        shutil.copytree(built[1][name], folder / name)
    return folder


@pytest.mark.parametrize(("suite", "metrics"), [
    ("risk", {"headline": {"value": 0.5, "ci": [0.1]}}), ("risk", {"headline": {"value": 0.5, "ci": 3}}),
    ("compare", {"gate": [1]}), ("compare", {"base": "runs/r1"}), ("leaderboard", {"boards": {"a": 1}}),
    ("leaderboard", {"runs": [1]}), ("risk", [1, 2])])
def test_a_metrics_file_of_another_shape_marks_its_run_and_hides_no_other(two_risk_runs, tmp_path, suite, metrics):
    run = two_risk_runs / "risk-ord"
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "suite": suite}))
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main(["view", str(two_risk_runs), "--out", str(tmp_path / "site"), "--no-leaderboards"]) == 0
    rows = {s.path.name: s for s in build_view(ViewConfig([str(two_risk_runs)], out=str(tmp_path / "site"),
                                                          leaderboards=False)).runs}
    assert sorted(rows) == ["risk-lr", "risk-ord"]
    assert rows["risk-ord"].status.startswith(("metrics.json unexpected shape", "metrics.json is not a JSON object"))
    assert rows["risk-lr"].headline.system == "tfidf-lr" and rows["risk-lr"].status == "complete"


def test_a_banner_carried_from_an_input_run_goes_when_the_input_changes(two_risk_runs, tmp_path):
    assert main(["compare", str(two_risk_runs / "risk-lr"), str(two_risk_runs / "risk-ord"), "--out",
                 str(two_risk_runs / "cmp"), "--bootstrap", "50"]) in (0, 1)
    path = two_risk_runs / "risk-lr" / "metrics.json"
    clean = path.read_text()
    metrics = json.loads(clean)
    metrics["methods"]["tfidf-lr"]["flagged"] = True
    path.write_text(json.dumps(metrics))
    cfg = ViewConfig([str(two_risk_runs)], out=str(tmp_path / "site"), leaderboards=False)
    rows = {s.path.name: s for s in build_view(cfg).runs}
    assert "flagged results" in rows["risk-lr"].flags and "flagged results" in rows["cmp"].flags
    path.write_text(clean)
    rows = {s.path.name: s for s in build_view(cfg).runs}
    assert "flagged results" not in rows["risk-lr"].flags and "flagged results" not in rows["cmp"].flags
    page = (tmp_path / "site" / "index.html").read_text()
    assert "have flagged results" not in page


def test_the_view_never_writes_into_a_run_directory(two_risk_runs, tmp_path, capsys):
    before = tree_hashes(two_risk_runs)
    for args in ([str(two_risk_runs), "--out", str(two_risk_runs / "risk-ord" / "figures" / "v")],
                 [str(two_risk_runs), "--out", str(two_risk_runs / "risk-ord")]):
        capsys.readouterr()
        assert main(["view", *args, "--no-leaderboards"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "give the view its own --out folder" in err[0]
    assert tree_hashes(two_risk_runs) == before
    # a run directory as the folder: the page goes beside it, not into it (FOLDER/view would be)
    assert main(["view", str(two_risk_runs / "risk-lr"), "--no-leaderboards"]) == 0
    assert (two_risk_runs / "risk-lr-view" / "index.html").is_file()
    assert tree_hashes(two_risk_runs / "risk-lr") == {k.split("/", 1)[1]: v for k, v in before.items()
                                               if k.startswith("risk-lr/")}
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["view", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_serve_answers_for_the_page_and_the_runs_only(two_risk_runs, tmp_path):
    from starlette.testclient import TestClient

    from carebench.view.serve import serve_app

    (tmp_path / "secret.txt").write_text("not for the browser")  # beside both: in the folder they share
    res = build_view(ViewConfig([str(two_risk_runs)], out=str(tmp_path / "site"), leaderboards=False))
    (tmp_path / "site" / "notes.txt").write_text("beside the page")
    app, page = serve_app(res.index, [r.path for r in res.runs])
    with TestClient(app) as client:
        assert client.get(page).text == res.index.read_text("utf-8")
        assert client.get("/", follow_redirects=False).headers["location"] == page
        report = client.get("/runs/risk-lr/report.html")
        assert report.status_code == 200 and report.text == (two_risk_runs / "risk-lr" / "report.html").read_text()
        for path in ("/secret.txt", "/site/notes.txt", "/site/runs-cache.json", "/runs/../secret.txt",
                     "/runs/risk-lr/../../secret.txt"):
            assert client.get(path).status_code == 404, path


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_one_line(two_risk_runs, tmp_path, capsys, port):
    pytest.importorskip("uvicorn")
    assert main(["view", str(two_risk_runs), "--out", str(tmp_path / "site"), "--no-leaderboards", "--serve",
                 "--port", port]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not between 0 and 65535" in err[0]
