"""``carebench view`` in a real browser (Playwright driving Debian's chromium, as the annotate
browser tests do), opened from file:// at a desktop and a phone width.

In CI (CI=true) a missing chromium or Playwright fails this test instead of skipping it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from browser import CHROMIUM, FLAGS
from view.view_runs import NEEDLE


@pytest.mark.parametrize("width", [1400, 390])
def test_view_in_chromium(playwright, built, width, tmp_path):
    root, runs, out, _ = built
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    try:
        page = browser.new_page(viewport={"width": width, "height": 844})
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto((out / "index.html").resolve().as_uri())

        # the runs table lists each run once
        names = page.eval_on_selector_all("#runs tbody tr td:first-child a", "els => els.map(e => e.textContent)")
        expected = sorted(p.relative_to(root / "runs").as_posix() for p in runs.values())
        assert sorted(names) == expected
        assert page.inner_text("#runs-shown") == f"{len(expected)} of {len(expected)} runs shown"

        # the headline box is within the first screen
        box = page.locator("#headline").bounding_box()
        assert box is not None and box["y"] + box["height"] <= 844
        assert "macro-F1" in page.inner_text("#headline")

        # no horizontal page scroll
        assert page.evaluate("document.documentElement.scrollWidth") <= width

        # filter by suite
        page.select_option("#f-suite", "risk")
        assert page.inner_text("#runs-shown") == f"3 of {len(expected)} runs shown"
        page.select_option("#f-suite", "")

        # search finds a reply by a word in it, and the hit opens its run's report
        page.fill("#q", NEEDLE)
        hits = page.locator("#results li")
        assert hits.count() == 1
        assert NEEDLE in hits.first.locator(".hit-text").inner_text()
        assert '<img src=x onerror="window.__xss = 2">' in hits.first.locator(".hit-text").inner_text()
        assert page.evaluate("() => window.__xss") is None  # shown as text, never run
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        hits.first.locator("a.hit-run").click()
        page.wait_for_url("**/nested/support/report.html")
        assert Path(page.url.removeprefix("file://")) == (runs["support"] / "report.html").resolve()
        # a screenshot last: after a full-page screenshot, headless chromium's clicks miss their target
        page.go_back()
        page.fill("#q", NEEDLE)
        shots = Path(os.environ.get("CAREBENCH_SCREENSHOTS") or tmp_path)
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"view-{width}.png"), full_page=True)

        assert errors == []
        assert requests and all(u.startswith("file://") for u in requests), requests
    finally:
        browser.close()
