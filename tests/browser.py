"""The headless browser shared by the browser tests: Playwright drives Debian's chromium
(no browser download). In CI (CI=true) a missing chromium or Playwright fails the test
instead of skipping it: .ci/run installs the Debian package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CAREBENCH_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need_browser():
    """``sync_playwright``, or a skip (a failure under CI) naming what is missing."""
    problem = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        problem = "the playwright package is not installed (pip install -e '.[test]')"
    if problem is None and not Path(CHROMIUM).exists():
        problem = f"{CHROMIUM} is missing (apt-get install -y chromium)"
    if problem is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser tests cannot run: {problem}")
        pytest.skip(problem)
    return sync_playwright


@pytest.fixture(scope="module")
def playwright():
    sync_playwright = need_browser()
    with sync_playwright() as p:
        yield p
