"""What a risk report says beside its numbers: failure reasons by name, failed predictions
said as scored (not as missing), the caveat of a few resampled groups, and a paired
difference whose interval collapsed to a point is not called evidence.

Expected texts come from wording.CODE_NAMES, the records written here and hand counts."""

from __future__ import annotations

import json
import re

from run_dirs import write_risk_run

from carebench.wording import CODE_NAMES


def _page_text(run_dir):
    html = (run_dir / "report.html").read_text("utf-8")
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _headline(run_dir):
    html = (run_dir / "report.html").read_text("utf-8")
    box = html[html.index('<div class="headline"'):html.index("</header>")]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", box))


def test_failures_are_named_and_said_as_scored(tmp_path):
    gold = {f"i{k:02d}": k % 4 for k in range(40)}
    flaky = {i: (None if k % 2 else g) for k, (i, g) in enumerate(gold.items())}  # 20 parse failures
    good = {i: g for i, g in gold.items()}
    run = write_risk_run(tmp_path / "r", gold, {"good": good, "flaky": flaky}, rerender=True)
    text = _page_text(run)
    assert f"Commonest failures: {CODE_NAMES['parse_error']} (parse_error): 20" in text
    assert "parse_error (20)" not in text
    head = _headline(run)
    assert "flaky: 20 failed predictions scored as wrong (the level farthest from gold)" in head
    assert "incomplete: flaky" not in head  # every item was scored: nothing is missing
    drop = write_risk_run(tmp_path / "d", gold, {"good": good, "flaky": flaky}, failures="drop", rerender=True)
    head = _headline(drop)
    assert "flaky: 20 failed predictions left out of its scores" in head
    assert "incomplete: flaky: 20 of 40 items not scored" in head


def test_a_few_resampled_groups_earn_the_small_n_caveat(tmp_path):
    gold = {f"i{k:02d}": k % 4 for k in range(80)}
    groups = {i: f"g{k % 3}" for k, i in enumerate(gold)}  # 80 items, 3 groups
    pred = {i: (g + (k % 5 == 0)) % 4 for k, (i, g) in enumerate(gold.items())}
    run = write_risk_run(tmp_path / "g", gold, {"m": pred}, groups=groups, rerender=True)
    assert json.loads((run / "metrics.json").read_text())["settings"]["resampling"].startswith("cluster")
    head = _headline(run)
    assert "small n: the intervals resample 3 groups of items (fewer than 30)" in head
    alone = write_risk_run(tmp_path / "i", gold, {"m": pred}, rerender=True)  # items resampled: n = 80
    assert "small n" not in _headline(alone)


def test_a_collapsed_paired_interval_is_not_called_evidence(tmp_path):
    out = write_risk_run(tmp_path / "one", {"only": 1}, {"right": {"only": 1}, "off": {"only": 3}}, rerender=True)
    metrics = json.loads((out / "metrics.json").read_text())
    comps = metrics["paired_vs_best"]["comparisons"]
    collapsed = [(m, k) for m, res in comps.items() for k in ("macro_f1", "qwk", "mae", "accuracy")
                 if res[k]["diff"] is not None and None not in res[k]["ci"] and res[k]["ci"][0] == res[k]["ci"][1]]
    assert collapsed  # one item: every resample is that item
    section = (out / "report.md").read_text().split("Paired comparisons")[-1]
    assert "interval collapsed to a point (n = 1)" in section
    rows = [r for r in section.splitlines() if r.startswith("|") and "---" not in r][1:]
    assert rows and not any(re.search(r"\|\s*yes\s*\|", r) for r in rows)
