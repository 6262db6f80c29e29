"""The risk report: flagged methods first and unranked (item 5), Table 2 styling (item 12),
per-method chance rows (item 4) and the failure policy beside each table."""

from __future__ import annotations

import re

from carebench.report.html import render_html
from carebench.report.markdown import render_markdown
from carebench.risk.report import build_risk_report as build_report
from carebench.risk.scoring import score_records


def _rec(item, method, gold, pred, status="ok", error=None):
    return {"item_id": item, "method": method, "gold": gold, "pred": pred, "status": status,
            "group": None, "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "latency_s": 0.0, "cost_usd": 0.0, "n_calls": 0, "raw": "",
            "detail": {"error": error} if error else {}}


GOLD = [0, 1, 2, 3] * 3  # 12 items


def _records():
    recs = []
    preds = {
        "good": GOLD,  # accuracy 1.0
        "fair": [g if i % 3 else (g + 1) % 4 for i, g in enumerate(GOLD)],  # 8/12
        "poor": [g if i % 2 else (g + 2) % 4 for i, g in enumerate(GOLD)],  # 6/12
    }
    for name, pred in preds.items():
        recs += [_rec(f"i{i}", name, g, p) for i, (g, p) in enumerate(zip(GOLD, pred, strict=True))]
    recs += [_rec(f"i{i}", "broken", g, None, "error", "HTTP 404: model `x` does not exist")
             for i, g in enumerate(GOLD)]
    recs += [_rec("i0", "fewshot", 0, None, "excluded")] + [
        _rec(f"i{i}", "fewshot", g, g) for i, g in enumerate(GOLD) if i]
    return recs


def _md():
    recs = _records()
    metrics = score_records(recs, B=50)
    manifest = {"dataset": {"name": "t", "source": "t"}, "config": {}}
    report = build_report(metrics, recs, manifest)
    return metrics, report, render_markdown(report)


def _row(md: str, start: str) -> list[str]:
    line = next(ln for ln in md.splitlines() if ln.startswith(f"| {start}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_failing_method_is_warned_first_marked_and_not_ranked():
    metrics, report, md = _md()
    assert metrics["methods"]["broken"]["flagged"] is True
    # the headline table comes first, and the warning stands just above it
    assert report.sections[0].title == "Main results (Table 2)"
    warning = md[md.index("## Main results"): md.index("| Method")]
    assert "broken failed on 12 of 12 items (100%)" in warning
    assert "error: HTTP 404: model \\`x\\` does not exist: 12" in warning  # md-escaped; a reason, then its count
    row = _row(md, "⚠ broken (flagged")
    assert not any(c.startswith(("**", "<u>")) for c in row[1:])
    assert metrics["settings"]["best_by_macro_f1"] in ("good", "fewshot")
    assert "broken" not in metrics["paired_vs_best"]["comparisons"]


def test_table2_bolds_best_and_underlines_second_best():
    _, _, md = _md()
    table2 = md[md.index("## Main results"): md.index("## Bootstrap")]
    # accuracy column: good and fewshot 1.000 (bold, tied), fair 0.667 second (underlined)
    assert _row(table2, "good")[1] == "**1.000**"
    assert _row(table2, "fewshot")[1] == "**1.000**"
    assert _row(table2, "fair")[1] == "<u>0.667</u>"
    assert _row(table2, "poor")[1] == "0.500"
    # MAE (lower is better): good 0 bold; fair misses i0, i6, i9 by 1 and i3 by 3 (6/12 =
    # 0.5) second; poor misses six items by 2 (1.0)
    assert _row(table2, "good")[5] == "**0.000**" and _row(table2, "fair")[5] == "<u>0.500</u>"
    assert _row(table2, "poor")[5] == "1.000"
    # chance rows never compete
    assert not _row(table2, "Chance (uniform")[1].startswith(("**", "<u>"))
    html = render_html(build_report(score_records(_records(), B=50), _records(),
                                    {"dataset": {}, "config": {}}))
    assert re.search(r'class="right second"(?: data-sort="[^"]*")?><u>0\.667</u>', html)  # tables sort


def test_chance_row_for_a_method_scored_on_fewer_items_and_policy_beside_tables():
    _, _, md = _md()
    row = _row(md, "Chance on the 11 items fewshot scored")
    # labels (1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3): accuracy of a uniform guesser is 1/4
    assert row[1] == "0.250"
    for caption in ("Table 2:", "Table 4:", "Per-class F1.", "Share of items placed below",
                    "Paired bootstrap"):
        line = next(ln for ln in md.splitlines() if caption in ln)
        assert "Failure policy: wrong" in line, caption
