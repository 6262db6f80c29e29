"""``carebench view``: the page built over several run directories, read back with html.parser.

References are independent of the view: run names from the directories made, headline and
leaderboard values recomputed from records.jsonl with scikit-learn, texts from the runs' records.
"""

from __future__ import annotations

import json
import re
import sys
from html.parser import HTMLParser

from sklearn.metrics import f1_score

from carebench.cli import main
from view.view_runs import HOSTILE, NEEDLE, counting_comparers


class Page(HTMLParser):
    """Rows of the runs table (cell texts), every tag's attributes, the JSON data block and each
    run's records block."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.attrs: list[tuple[str, dict]] = []
        self.data_block = ""
        self.scripts: list[str] = []
        self.records: dict[int, str] = {}  # run index -> its records block
        self._run: int | None = None
        self._in_runs = self._in_row = self._in_cell = self._in_data = self._in_script = False
        self._table_depth = 0
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.attrs.append((tag, a))
        if tag == "table" and a.get("id") == "runs":
            self._in_runs = True
        if self._in_runs and tag == "tr" and self._in_body:
            self._in_row = True
            self.rows.append([])
        if self._in_runs and tag == "tbody":
            self._in_body = True
        if self._in_row and tag == "td":
            self._in_cell = True
            self.rows[-1].append("")
        if tag == "script":
            self._in_script = "type" not in a  # the page's own code; anything typed is a data block
            self._in_data = a.get("id") == "view-data"
            self._run = int(a["data-run"]) if a.get("class") == "run-records" else None
            if self._run is not None:
                self.records[self._run] = ""

    _in_body = False

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_runs = self._in_body = False
        if tag == "tr":
            self._in_row = False
        if tag == "td":
            self._in_cell = False
        if tag == "script":
            self._in_script = self._in_data = False
            self._run = None

    def handle_data(self, data):
        if self._in_cell:
            self.rows[-1][-1] += data
        if self._in_data:
            self.data_block += data
        elif self._run is not None:
            self.records[self._run] += data
        elif self._in_script:
            self.scripts.append(data)


def _macro_f1(run_dir, method):
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in recs if r["method"] == method]
    return f1_score([r["gold"] for r in rows], [r["pred"] for r in rows], average="macro", labels=[0, 1, 2, 3])


def test_the_runs_table_lists_each_run_once(built):
    root, runs, out, html = built
    page = Page(html)
    names = [row[0].split(" ")[0] for row in page.rows]
    expected = sorted(p.relative_to(root / "runs").as_posix() for p in runs.values())
    assert sorted(names) == expected
    assert len(names) == len(set(names)) == 5
    # each row links to that run's own report
    hrefs = {a["href"] for t, a in page.attrs if t == "a" and a.get("href", "").endswith("report.html")}
    for p in runs.values():
        assert (out / f"../runs/{p.relative_to(root / 'runs').as_posix()}/report.html").resolve().is_file()
        assert f"../runs/{p.relative_to(root / 'runs').as_posix()}/report.html" in hrefs


def test_headline_is_the_best_method_with_its_interval(built):
    _root, runs, _out, html = built
    page = Page(html)
    row = next(r for r in page.rows if r[0].startswith("risk-lr"))
    f1 = _macro_f1(runs["risk-lr"], "tfidf-lr")
    assert f"tfidf-lr: macro-F1 {f1:.3f} [" in row[4] and "(n = 48)" in row[4]
    ci = json.loads((runs["risk-lr"] / "metrics.json").read_text())["methods"]["tfidf-lr"]["macro_f1"]["ci"]
    assert f"[{ci[0]:.3f}, {ci[1]:.3f}]" in row[4]


def test_banners_of_runs_and_a_compare_carries_its_inputs(built):
    _root, _runs, _out, html = built
    page = Page(html)
    banners = {r[0].split(" ")[0]: r[6] for r in page.rows}
    assert "illustrative data" in banners["risk-lr"]  # builtin:sample
    assert "embedded model" in banners["embedded"]
    assert "illustrative data" not in banners["nested/support"] and "embedded model" not in banners["nested/support"]
    assert "illustrative data" in banners["cmp"]  # from the two risk runs it compared
    assert re.search(r"Warning:</strong> 1 run\(s\) use the small embedded model", html)


def test_leaderboard_merges_the_comparable_risk_runs(built):
    _root, runs, _out, html = built
    section = html.split('id="leaderboards"')[1].split('id="search"')[0]
    text = re.sub(r"<[^>]+>", " ", section)
    first = section.split("</table>")[0]  # the risk group's headline board
    for run, method in (("risk-lr", "tfidf-lr"), ("risk-ord", "tfidf-ordinal")):
        f1 = _macro_f1(runs[run], method)
        cell = re.search(rf'<td data-label="system">{method}</td><td data-label="macro-F1" class="num">([^<]*)</td>'
                         rf'<td data-label="run"><a href="[^"]*{run}/report.html">', first)
        assert cell is not None and cell.group(1).startswith(f"{f1:.3f} ["), method
    # the embedded-model risk run has other data: it is not merged with the built-in-sample runs
    assert "Group 1: 2 run(s), 2 system(s)" in text


def _strings(x):
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict | list):
        for v in x.values() if isinstance(x, dict) else x:
            yield from _strings(v)


def test_each_runs_records_are_carried_escaped_for_the_search(built):
    root, _runs, _out, html = built
    page = Page(html)
    assert "<script>window.__xss" not in html and "<img src=x" not in html
    names = [r["name"] for r in json.loads(page.data_block)["runs"]]
    with_records = {i for i, n in enumerate(names) if (root / "runs" / n / "records.jsonl").is_file()}
    assert set(page.records) == with_records and len(with_records) == 4  # the compare has no records
    for i, block in page.records.items():
        assert "<" not in block  # nothing in a block can close it or open markup
        lines = (root / "runs" / names[i] / "records.jsonl").read_text("utf-8").splitlines()
        # every record reads back as the file holds it, in order
        assert [json.loads(x) for x in block.splitlines() if x.strip()] == [json.loads(x) for x in lines if x.strip()]
    support = names.index("nested/support")
    found = [t for r in map(json.loads, page.records[support].splitlines()) for t in _strings(r) if NEEDLE in t]
    assert found and all(HOSTILE in t for t in found)  # the hostile reply, back from the escapes
    assert all(NEEDLE not in block for i, block in page.records.items() if i != support)


def test_a_run_over_the_byte_limit_carries_its_first_whole_lines(tmp_path):
    from carebench.view.search import run_records

    lines = [json.dumps({"item_id": k, "text": f"<b>{k}</b> " + "x" * 40}) + "\n" for k in range(10)]
    (tmp_path / "records.jsonl").write_text("".join(lines), "utf-8")
    size = len(lines[0].encode())
    raw, cut = run_records(tmp_path, limit=3 * size + 5)
    assert cut and [json.loads(x)["item_id"] for x in raw.decode().splitlines()] == [0, 1, 2]
    assert b"<" not in raw and json.loads(raw.decode().splitlines()[0])["text"].startswith("<b>0</b> ")
    raw, cut = run_records(tmp_path)
    assert not cut and [json.loads(x) for x in raw.decode().splitlines()] == [json.loads(x) for x in lines]
    assert run_records(tmp_path / "none") == (b"", False)


def test_no_external_url_and_only_hashed_scripts(built):
    _root, _runs, _out, html = built
    page = Page(html)
    for tag, a in page.attrs:
        for key in ("src", "href", "action"):
            v = a.get(key)
            if v is not None:
                assert not re.match(r"^([a-z][a-z0-9+.-]*:|//)", v, re.IGNORECASE), (tag, key, v)
    assert not re.search(r"https?://", html)
    csp = next(a["content"] for t, a in page.attrs if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and csp.count("'sha256-") == 2
    import base64
    import hashlib

    hashes = {"'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
              for s in page.scripts}
    assert hashes == set(re.findall(r"'sha256-[^']+'", csp))


def test_bad_folder_is_one_line_and_serve_without_the_extra(tmp_path, capsys, monkeypatch, built):
    assert main(["view", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"carebench: error: {tmp_path / 'nope'}: no such folder"]
    root = built[0]
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn now raises ImportError
    assert main(["view", str(root / "runs"), "--out", str(tmp_path / "s"), "--serve", "--no-leaderboards"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'carebench[annotate]'" in err[0]
    assert (tmp_path / "s" / "index.html").is_file()  # the page is written before serving is tried


def test_a_rebuild_reuses_the_leaderboards_until_a_run_changes(built, tmp_path):
    import shutil

    from carebench.view import ViewConfig, build_view

    runs = built[1]
    for name in ("risk-lr", "risk-ord"):
        shutil.copytree(runs[name], tmp_path / "runs" / name)
    reads: list[str] = []
    counting = counting_comparers(reads)
    cfg = ViewConfig([str(tmp_path / "runs")], out=str(tmp_path / "site"), B=200)

    def lr_cell():
        html = (tmp_path / "site" / "index.html").read_text("utf-8")
        return re.search(r'<td data-label="system">tfidf-lr</td><td data-label="macro-F1" class="num">([^<]*)<',
                         html).group(1)

    build_view(cfg, counting)
    assert sorted(reads) == ["risk-lr", "risk-ord"]
    first = lr_cell()
    assert first.startswith(f"{_macro_f1(tmp_path / 'runs' / 'risk-lr', 'tfidf-lr'):.3f} [")
    reads.clear()
    build_view(cfg, counting)
    assert reads == [] and lr_cell() == first  # nothing changed: the leaderboards kept beside the page
    # one prediction of risk-lr changes: its suite's leaderboards are built again, with the new score
    path = tmp_path / "runs" / "risk-lr" / "records.jsonl"
    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    k = next(i for i, r in enumerate(recs) if r["method"] == "tfidf-lr" and r["pred"] == r["gold"])
    recs[k]["pred"] = (recs[k]["gold"] + 2) % 4
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    build_view(cfg, counting)
    assert sorted(reads) == ["risk-lr", "risk-ord"]
    assert lr_cell().startswith(f"{_macro_f1(tmp_path / 'runs' / 'risk-lr', 'tfidf-lr'):.3f} [") and lr_cell() != first


def test_the_records_budget_is_shared_smallest_first(tmp_path):
    from carebench.view.search import record_limits

    sizes = {"a": 10, "b": 100, "c": 1000, "d": 0}
    for name, n in sizes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "records.jsonl").write_bytes(b"x" * n)
    (tmp_path / "e").mkdir()  # no records at all
    dirs = [tmp_path / n for n in ("a", "b", "c", "d", "e")]
    # 300 in all: d and e need nothing, a takes its 10, b its 100 (under an even share of 290 / 2),
    # c what is left (190)
    assert record_limits(dirs, total=300, each=1000) == [10, 100, 190, 0, 0]
    assert record_limits(dirs, total=10_000, each=50) == [10, 50, 50, 0, 0]  # the per-run cap
    assert record_limits(dirs, total=60, each=1000) == [10, 25, 25, 0, 0]  # a even share of 50 between b, c
