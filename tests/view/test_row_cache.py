"""The runs table's rows kept beside the page: a rebuild reads only the runs that changed, and
its rows are those a fresh build reads.

References: the headline is recomputed from records.jsonl with scikit-learn, or is the value
the test wrote into metrics.json; runs read are counted by wrapping the summariser.
"""

from __future__ import annotations

import json
import shutil

import pytest
from sklearn.metrics import f1_score

from carebench.view import ViewConfig, build_view, row_cache
from carebench.view.row_cache import ROW_CACHE


@pytest.fixture
def runs(built, tmp_path, monkeypatch):
    """Copies of the risk runs, the support run and the compare, and the runs each build reads."""
    folder = tmp_path / "runs"
    for name in ("risk-lr", "risk-ord", "support", "compare"):
        shutil.copytree(built[1][name], folder / name)
    reads: list[str] = []
    real = row_cache.summarise

    def counting(path):
        reads.append(path.name)
        return real(path)

    monkeypatch.setattr(row_cache, "summarise", counting)
    return folder, reads


def _build(folder, out):
    return build_view(ViewConfig([str(folder)], out=str(out), leaderboards=False))


def _rows(result):
    return {s.path.name: s for s in result.runs}


def _macro_f1(run_dir, method):
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in recs if r["method"] == method]
    return f1_score([r["gold"] for r in rows], [r["pred"] for r in rows], average="macro", labels=[0, 1, 2, 3])


def test_a_rebuild_reads_no_unchanged_run_and_shows_the_same_rows(runs, tmp_path):
    folder, reads = runs
    first = _build(folder, tmp_path / "site")
    assert sorted(reads) == ["compare", "risk-lr", "risk-ord", "support"]
    page = (tmp_path / "site" / "index.html").read_bytes()
    reads.clear()
    again = _build(folder, tmp_path / "site")
    assert reads == []
    assert again.runs == first.runs  # carried input banners and demo parts are applied after the cache
    assert (tmp_path / "site" / "index.html").read_bytes() == page
    row = _rows(again)["risk-lr"]
    assert row.headline.system == "tfidf-lr" and row.headline.n == 48 and row.has_report
    assert f"{row.headline.value:.12f}" == f"{_macro_f1(folder / 'risk-lr', 'tfidf-lr'):.12f}"
    assert "illustrative data" in _rows(again)["compare"].flags  # the compare records its inputs' banners


def test_a_changed_metrics_file_or_a_removed_report_is_read_again(runs, tmp_path):
    folder, reads = runs
    _build(folder, tmp_path / "site")
    path = folder / "risk-lr" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics["methods"]["tfidf-lr"]["macro_f1"]["value"] = 0.987654321
    path.write_text(json.dumps(metrics))
    (folder / "risk-ord" / "report.html").unlink()
    reads.clear()
    rows = _rows(_build(folder, tmp_path / "site"))
    assert sorted(reads) == ["risk-lr", "risk-ord"]
    assert rows["risk-lr"].headline.value == 0.987654321
    assert not rows["risk-ord"].has_report and rows["support"].has_report
    shutil.rmtree(folder / "support")
    reads.clear()
    rows = _rows(_build(folder, tmp_path / "site"))
    assert reads == [] and sorted(rows) == ["compare", "risk-lr", "risk-ord"]
    kept = json.loads((tmp_path / "site" / ROW_CACHE).read_text())["runs"]
    assert sorted(p.rsplit("/", 1)[1] for p in kept) == ["compare", "risk-lr", "risk-ord"]  # the gone run's row too


@pytest.mark.parametrize("damage", ["not json", '{"version": [1, "carebench 0.0.0"], "runs": {}}', "rows"])
def test_a_damaged_or_foreign_cache_is_read_around(runs, tmp_path, damage):
    folder, reads = runs
    first = _build(folder, tmp_path / "site")
    cache = tmp_path / "site" / ROW_CACHE
    if damage == "rows":  # every row present, stamped right, but not a row
        data = json.loads(cache.read_text())
        for entry in data["runs"].values():
            entry["row"] = {"suite": "x"}
        cache.write_text(json.dumps(data))
    else:
        cache.write_text(damage)
    reads.clear()
    again = _build(folder, tmp_path / "site")
    assert sorted(reads) == ["compare", "risk-lr", "risk-ord", "support"] and again.runs == first.runs
