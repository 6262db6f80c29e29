"""``carebench view`` in a real browser (Playwright driving Debian's chromium, as the annotate
browser tests do), opened from file:// at a desktop and a phone width, over the demo (all of
its parts) plus three runs.

In CI (CI=true) a missing chromium or Playwright fails this test instead of skipping it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from browser import CHROMIUM, FLAGS
from view.view_runs import NEEDLE

HEIGHT = 844  #: the first screen: a phone's height (iPhone 12-15), used at both widths

#: the right edge of the furthest element that is not inside a box scrolling on its own
FURTHEST_RIGHT = """() => {
  let right = 0;
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= 0) { continue; }
    let p = el.parentElement, inner = false;
    while (p && p !== document.body) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll") { inner = true; break; }
      p = p.parentElement;
    }
    if (!inner) { right = Math.max(right, r.right + window.scrollX); }
  }
  return right;
}"""


def _no_sideways_scroll(page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("document.body.scrollWidth") <= width
    assert page.evaluate(FURTHEST_RIGHT) <= width + 0.5  # nothing cut off by a hidden overflow either


@pytest.mark.parametrize("width", [1400, 390])
def test_view_of_the_demo_and_three_runs_in_chromium(playwright, demo_site, width, tmp_path):
    folder, runs, out = demo_site
    parts = json.loads((runs["demo"] / "metrics.json").read_text())["parts"]
    assert len(parts) >= 4  # every part of the demo ran
    expected = sorted(["risk-lr", "risk-ord", "support", "demo", *(f"demo/{p}" for p in parts)])
    suites = [json.loads((folder / n / "manifest.json").read_text())["suite"] for n in expected]
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    try:
        page = browser.new_page(viewport={"width": width, "height": HEIGHT})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto((out / "index.html").resolve().as_uri())

        # the runs table lists each run once
        names = page.eval_on_selector_all("#runs tbody tr td:first-child a", "els => els.map(e => e.textContent)")
        assert sorted(names) == expected
        assert page.inner_text("#runs-shown") == f"{len(expected)} of {len(expected)} runs shown"

        # the headline box is within the first screen, and says something about the runs
        box = page.locator("#headline").bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT
        assert f"{len(expected)} run(s)" in page.inner_text("#headline")
        assert "macro-F1" in page.inner_text("#headline")

        # no horizontal page scroll
        _no_sideways_scroll(page, width)

        # filter by suite
        page.select_option("#f-suite", "risk")
        assert page.inner_text("#runs-shown") == f"{suites.count('risk')} of {len(expected)} runs shown"
        page.select_option("#f-suite", "")

        # search finds an item of the demo by a word in it
        page.fill("#q", "exhausting")
        hits = page.locator("#results li")
        assert hits.count() == 1 and hits.first.locator("a.hit-run").inner_text() == "demo"
        assert "Work has been exhausting lately" in hits.first.locator(".hit-text").inner_text()

        # search finds a reply by a word in it, and the hit opens its run's report
        page.fill("#q", NEEDLE)
        hits = page.locator("#results li")
        assert hits.count() == 1
        assert hits.first.locator("a.hit-run").inner_text() == "support"
        text = hits.first.locator(".hit-text").inner_text()
        assert NEEDLE in text and '<img src=x onerror="window.__xss = 2">' in text  # the hostile markup as text
        assert page.evaluate("() => window.__xss") is None  # never run
        _no_sideways_scroll(page, width)
        hits.first.locator("a.hit-run").click()
        page.wait_for_url("**/support/report.html")
        assert Path(page.url.removeprefix("file://")) == (runs["support"] / "report.html").resolve()
        # a screenshot last: after a full-page screenshot, headless chromium's clicks miss their target
        page.go_back()
        page.fill("#q", NEEDLE)
        shots = Path(os.environ.get("CAREBENCH_SCREENSHOTS") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"view-{width}.png"), full_page=True)

        assert errors == []
        # no network request: everything the page and the report it opened asked for is a local file
        assert requests and all(u.startswith("file://") for u in requests), requests
    finally:
        browser.close()
