"""Every suite's report, opened in headless chromium at a desktop (1400 px) and a phone
(390 px) width: no table or figure runs off the page without a visible scroll cue, a
wide table's caption stays whole in its visible box, and no two pieces of text overlap
(each text node's line boxes, compared pairwise). The checks run in the page
(``layout_check.js``) on the laid-out boxes, with every ``<details>`` opened.

Beside the layout, what a reader sees first and how it is worded: risk's headline
table leads, nothing is "best" among one system or among ties, the demo links its
suite reports, and keys read as words.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from report.suite_runs import every_run

CHECK = (Path(__file__).parent / "layout_check.js").read_text("utf-8")
WIDTHS = (1400, 390)
NAMES = ("risk", "support", "plural", "plural-one", "construct", "demo")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return every_run(tmp_path_factory.mktemp("suite-runs"))


@pytest.fixture(scope="module")
def browser(playwright):
    from browser import CHROMIUM, FLAGS

    b = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    yield b
    b.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", NAMES)
def test_report_fits_the_page_and_no_texts_overlap(runs, browser, name, width):
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.goto((runs[name] / "report.html").resolve().as_uri())
        assert page.locator("table").count() > 0
        problems = page.evaluate(CHECK)
    finally:
        page.close()
    assert problems == [], f"{name} at {width} px:\n" + "\n".join(problems[:20])


def test_the_checker_sees_a_clipped_table_and_overlapping_text(browser, tmp_path):
    """The page checks can fail: a wide table without the report's CSS, and two
    absolutely placed texts on one spot."""
    cells = "".join(f"<td>{'x' * 40}{i}</td>" for i in range(8))
    page_html = (f'<div class="table-wrap" style="overflow-x:auto"><table><caption>{"long caption " * 40}'
                 f"</caption><tr>{cells}</tr></table></div>"
                 '<p style="position:absolute;top:300px;left:10px">first text</p>'
                 '<p style="position:absolute;top:304px;left:14px">second text</p>')
    f = tmp_path / "bad.html"
    f.write_text(f"<!DOCTYPE html><html><body>{page_html}</body></html>", "utf-8")
    page = browser.new_page(viewport={"width": 600, "height": 600})
    try:
        page.goto(f.as_uri())
        problems = page.evaluate(CHECK)
    finally:
        page.close()
    kinds = {p.split(":")[0] for p in problems}
    assert kinds == {"scrolls without a cue", "caption cut", "texts overlap"}, problems


def _sections(report_html: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'<section id="[^"]+">\n<h2>(.*?)</h2>', report_html)]


def test_risk_headline_table_first_and_run_details_last(runs):
    text = (runs["risk"] / "report.html").read_text("utf-8")
    titles = _sections(text)
    assert titles[0] == "Main results (Table 2)"
    assert titles[-1] == "Run details"
    # the illustrative-data warning stays next to the headline numbers
    first = text.split('<section id="', 2)[1]
    assert "Illustrative data" in first


def test_risk_items_show_collapsed_escaped_text_and_no_unexplained_column(runs):
    sample = Path(__file__).parents[2] / "src" / "carebench" / "data" / "risk" / "sample.jsonl"
    items = {r["id"]: r["text"] for r in map(json.loads, sample.read_text("utf-8").splitlines())}
    md = (runs["risk"] / "report.md").read_text("utf-8")
    page = (runs["risk"] / "report.html").read_text("utf-8")
    part = page.split("Predictions per item", 1)[1].split("</table>", 1)[0]
    head = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', part)
    assert head[:3] == ["Item", "Text", "Gold"]
    assert "Recovered" not in head  # no row of the sample was recovered from a cut file
    rows = re.findall(r"<tr><td[^>]*>(.*?)</td><td[^>]*>(.*?)</td>", part)
    assert len(rows) == 48
    for item_id, shown in rows:
        flat = " ".join(items[item_id].split())
        want = flat if len(flat) <= 160 else flat[:159].rstrip() + "\u2026"
        assert html.unescape(shown) == want
        assert "<" not in shown and ">" not in shown  # escaped
    assert "Recovered" not in md


def test_no_best_marking_for_one_system_and_plural_nouns(runs):
    one = (runs["plural-one"] / "report.html").read_text("utf-8")
    assert 'class="right best"' not in one and "<strong>" not in one.split("<main>", 1)[1].split(
        "Table 17", 1)[1].split("</table>", 1)[0]
    md = (runs["plural-one"] / "report.md").read_text("utf-8")
    assert "*1 system x 3 profiles, jury of 3, 3 prompts;" in md
    assert "bootstrap over 2 source cases (fewer than 10)" in md  # two source cases in the release


def test_support_slices_are_labelled_and_small_slices_flagged(runs):
    md = (runs["support"] / "report.md").read_text("utf-8")
    assert "| Turn structure | tasks |" in md and "| turn_structure |" not in md
    metrics = json.loads((runs["support"] / "metrics.json").read_text("utf-8"))
    n = {v: x["n_tasks"] for v, x in metrics["slices"]["turn_structure"]["values"].items()}
    assert all(k < 5 for k in n.values())  # four tasks: every side is small
    for v, k in n.items():  # values read as words ("single" -> "Single")
        assert f"| {v.capitalize()} \u2020 | {k} |" in md
    assert "Order unchanged: True" not in md and "Order unchanged" not in md


def test_construct_routing_reads_as_words(runs):
    md = (runs["construct"] / "report.md").read_text("utf-8")
    part = md.split("## Persona routing", 1)[1].split("\n## ", 1)[0]
    assert "embeddings\\_from\\_cache" not in part and "{}" not in part and "False" not in part
    cached = json.loads((runs["construct"] / "metrics.json").read_text("utf-8"))["details"]["route"][
        "embeddings_from_cache"]
    said = "read from the cache" if cached else "computed in this run"
    assert f"**persona embeddings:** {said}" in part
    assert "**fallbacks:** none" in part


def test_demo_links_every_suite_report(runs, browser):
    demo = runs["demo"]
    page = browser.new_page()
    try:
        page.goto((demo / "report.html").resolve().as_uri())
        hrefs = page.eval_on_selector_all("main a[href]", "xs => xs.map(a => a.getAttribute('href'))")
        page.click("text=risk report")
        assert page.url == (demo / "risk" / "report.html").resolve().as_uri()
    finally:
        page.close()
    assert hrefs == ["risk/report.html"]


PHONE_CHECK = """() => {
  const vw = document.documentElement.clientWidth;
  const out = {vw, scrollWidth: document.documentElement.scrollWidth, score: null, first: null,
               styles: [], split: []};
  // the score column: the first numeric column after the first text column of the first data table
  const table = document.querySelector("main table.data");
  const heads = Array.from(table.tHead.rows[0].cells);
  const firstText = heads.findIndex((th) => th.getAttribute("data-sort-type") === "text");
  const score = heads.find((th, j) => j > firstText && th.getAttribute("data-sort-type") === "number");
  if (score) {
    const r = score.getBoundingClientRect();
    out.score = {text: score.textContent, left: r.left, right: r.right};
  }
  const first = document.querySelector("main section > :not(h2)");
  const fr = first.getBoundingClientRect();
  out.first = {tag: first.tagName, left: fr.left, right: fr.right};
  const shown = "main, header, main *, header *";
  for (const el of document.querySelectorAll(shown)) {
    const cs = getComputedStyle(el);
    if (cs.wordBreak === "break-all" || cs.overflowWrap === "anywhere")
      out.styles.push(el.tagName + ": " + cs.wordBreak + " / " + cs.overflowWrap);
  }
  // every run of letters and digits in a table cell or caption lies on one line
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const host = node.parentElement;
    if (!host || !host.closest("td, th, caption, h1, h2, p, li, figcaption, summary")) continue;
    if (host.getClientRects().length === 0) continue;  // not rendered (closed details)
    for (const m of node.data.matchAll(/[\\p{L}\\p{N}]{2,}/gu)) {
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top)));
      if (lines.size > 1) out.split.push(m[0]);
    }
  }
  return out;
}"""


@pytest.mark.parametrize("name", ["risk", "support", "plural", "demo"])
def test_phone_width_fits_and_breaks_no_word(runs, browser, name):
    """At 390 px: no horizontal page scroll (wide tables scroll in their own box), the first
    block of the report and the headline table's score column header are on screen, no
    element may break words anywhere, and no word in a table, caption or paragraph is split
    across two lines (a model spec wraps after its punctuation)."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto((runs[name] / "report.html").resolve().as_uri())
        got = page.evaluate(PHONE_CHECK)
    finally:
        page.close()
    vw = got["vw"]
    assert vw == 390 and got["scrollWidth"] <= vw, got["scrollWidth"]
    assert got["score"] is not None, "no score column found"
    assert 0 <= got["score"]["left"] and got["score"]["right"] <= vw, got["score"]
    assert 0 <= got["first"]["left"] and got["first"]["right"] <= vw, got["first"]
    assert got["styles"] == []
    assert got["split"] == []


def test_the_phone_check_sees_a_word_split_and_a_page_scroll(browser, tmp_path):
    """The phone check can fail: a narrow cell that breaks anywhere splits a word, and a
    wide unwrapped line scrolls the page."""
    f = tmp_path / "bad.html"
    f.write_text('<!DOCTYPE html><html><body><header><h1>T</h1></header><main><section><h2>S</h2>'
                 '<table class="data"><thead><tr><th data-sort-type="text">name</th>'
                 '<th data-sort-type="number">score</th></tr></thead><tbody><tr>'
                 '<td style="overflow-wrap:anywhere;max-width:3em;width:3em">candidate</td><td>1</td></tr>'
                 '</tbody></table><p style="white-space:nowrap">' + "wide " * 200 + "</p></section></main>"
                 "</body></html>", "utf-8")
    page = browser.new_page(viewport={"width": 390, "height": 844})
    try:
        page.goto(f.as_uri())
        got = page.evaluate(PHONE_CHECK)
    finally:
        page.close()
    assert got["scrollWidth"] > got["vw"]
    assert got["styles"] == ["TD: normal / anywhere"]
    assert got["split"] == ["candidate"]
