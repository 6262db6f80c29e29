"""One banner style at the top of every report: the embedded model, illustrative data, flagged
results; a compare and a leaderboard carry their inputs' banners. Checked in the written
report.html/report.md (the banner precedes the contents and every section)."""

from __future__ import annotations

import json
import re

from run_dirs import support_tasks, write_risk_run, write_support_run

from carebench.cli import main
from carebench.report.banners import EMBEDDED, FLAGGED, ILLUSTRATIVE, TEXT

GOLD = {f"i{k}": k % 4 for k in range(10)}


def _banners(run_dir):
    html = (run_dir / "report.html").read_text()
    top = html.split('<nav class="toc"')[0]  # everything before the contents
    found = re.findall(r'<div class="banner" role="alert"><strong>Warning:</strong> ([^<]*)</div>', top)
    assert len(found) == html.count('class="banner"')  # no banner further down
    return found


def _md_banners(run_dir):
    md = (run_dir / "report.md").read_text()
    head = md.split("**Contents**")[0]
    return re.findall(r"> \[!WARNING\]\n> (.*)", head)


def test_a_clean_run_has_no_banner(tmp_path):
    run = write_support_run(tmp_path / "s", support_tasks(3), ["openai:a", "openai:b"],
                            lambda r, t, a, c, j: c != "c0", rerender=True)
    assert _banners(run) == [] and _md_banners(run) == []


def test_embedded_model_illustrative_and_flagged_runs_carry_their_banners(tmp_path, capsys):
    embedded = write_risk_run(tmp_path / "e", GOLD, {"llm": dict(GOLD)},
                              extra={"models": ["llamacpp:builtin"]}, rerender=True)
    assert _banners(embedded) == [TEXT[EMBEDDED]]
    assert len(_md_banners(embedded)) == 1 and "llamacpp:builtin" in _md_banners(embedded)[0]
    illustrative = write_risk_run(tmp_path / "i", GOLD, {"m": dict(GOLD)},
                                  extra={"dataset": {"name": "x", "sha256": "cd" * 32, "n": 10, "illustrative": True}},
                                  rerender=True)
    assert _banners(illustrative) == [TEXT[ILLUSTRATIVE]]
    # 3 of 10 predictions unparsed: over the default 20% failure limit, the method is flagged
    flagged = write_risk_run(tmp_path / "f", GOLD, {"m": {i: (None if k < 3 else v) for k, (i, v) in
                                                         enumerate(GOLD.items())}}, rerender=True)
    assert json.loads((flagged / "metrics.json").read_text())["methods"]["m"]["flagged"] is True
    assert _banners(flagged) == [TEXT[FLAGGED]]


def test_compare_and_leaderboard_carry_their_inputs_banners(tmp_path, capsys):
    def flagged_run(name, shift):
        return write_risk_run(tmp_path / name, GOLD, {"m": {i: (None if k < 3 else (v + shift) % 4)
                                                            for k, (i, v) in enumerate(GOLD.items())}}, rerender=True)

    a, b = flagged_run("a", 0), flagged_run("b", 1)
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp"), "--bootstrap", "100",
                 "--gate", "accuracy:1"]) == 0
    cmp_banners = _banners(tmp_path / "cmp")
    assert cmp_banners == [TEXT[FLAGGED].replace("This run has", "The runs it reads have")]
    assert "Gate passed" in (tmp_path / "cmp" / "report.html").read_text()  # the decision, beneath the banner
    c = write_risk_run(tmp_path / "c", GOLD, {"m2": dict(GOLD)}, extra={"models": ["llamacpp:builtin"]}, rerender=True)
    assert main(["leaderboard", str(a), str(c), "--out", str(tmp_path / "lb"), "--bootstrap", "100"]) == 0
    lb = _banners(tmp_path / "lb")
    assert lb == [TEXT[EMBEDDED].replace("This run uses", "The runs it reads use"),
                  TEXT[FLAGGED].replace("This run has", "The runs it reads have")]
    # a re-render rewrites the same bytes (the banners come from metrics.json)
    before = (tmp_path / "lb" / "report.html").read_bytes()
    assert main(["report", str(tmp_path / "lb")]) == 0
    assert (tmp_path / "lb" / "report.html").read_bytes() == before


def test_the_demo_copy_of_illustrative_data_stays_illustrative(tmp_path, capsys):
    from importlib import resources

    from carebench.risk.data import load_dataset
    from carebench.risk.demo import quick_subset

    data = tmp_path / "risk-quick-sample.jsonl"
    n = quick_subset(data)
    builtin_meta = json.loads((resources.files("carebench") / "data" / "risk" / "sample-with-negatives.meta.json").read_text())
    assert builtin_meta["illustrative"] is True
    ds = load_dataset(str(data))
    assert len(ds.items) == n and ds.illustrative is True and builtin_meta["description"] in ds.notes
    assert main(["risk", "run", "--data", str(data), "--method", "moderation-fixed", "--out", str(tmp_path / "r"),
                 "--bootstrap", "100"]) == 0
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["dataset"]["illustrative"] is True and manifest["dataset"]["derived_from"] == "builtin:sample-with-negatives"
    assert _banners(tmp_path / "r") == [TEXT[ILLUSTRATIVE]]
    # a plain file without a sidecar is not illustrative
    (tmp_path / "plain").mkdir()
    plain = tmp_path / "plain" / "x.jsonl"
    plain.write_text(data.read_text())
    assert load_dataset(str(plain)).illustrative is False
