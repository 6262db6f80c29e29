"""The support report's per-task score table sorts in a real browser (issue 11, item 12).

A scripted run (loopback stub) gives every task a different score per responder. Headless
chromium opens report.html; a click on a responder's column header must order the rows
as task_scores.csv orders them (ascending, then descending on a second click). A task id
and user turn carrying ``<script>`` markup must show as text and never run. With scripts
off the table is still complete.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from scripted_stub import Script, single_turn_task, two_responder_run

from carebench.support.tasks import load_tasks

WEIGHTS = (1, 2, 4, 1, 1, 1)  # each subset of the first three failed loses a different weight
EVIL = "t-<script>window.pwned = 1</script>"


@pytest.fixture(scope="module")
def sorted_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sorting")
    ids = ["t-alpha", EVIL, "t-gamma", "t-delta", "t-eps", "t-zeta"]
    path = tmp / "tasks.jsonl"
    rows = [single_turn_task(t, i, WEIGHTS, turn=f"Message {i}: <script>window.pwned = 2</script> I feel low.")
            for i, t in enumerate(ids)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    script = Script(load_tasks(path))
    # resp-a fails criterion subset (i+1) of task i, resp-b subset (6-i): distinct scores per column
    for i, tid in enumerate(ids):
        for resp, subset in (("resp-a", i + 1), ("resp-b", 6 - i)):
            for k in range(3):
                if subset >> k & 1:
                    for j in ("judge-a", "judge-b", "judge-c"):
                        script.script[(j, resp, tid, 0, f"c{k}")] = False
    with two_responder_run(tmp, path, script) as (run_dir, spec):
        return run_dir, spec


def _csv_order(run_dir: Path, column: str, descending: bool) -> list[str]:
    """Task ids ordered by one responder's score, read from task_scores.csv (not from the page)."""
    with open(run_dir / "task_scores.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    scores = [float(r[column]) for r in rows]
    assert len(set(scores)) == len(scores), "the fixture must give distinct scores"
    return [r["task_id"] for r in sorted(rows, key=lambda r: float(r[column]), reverse=descending)]


def _open(playwright, tmp_path, html: Path, scripts: bool = True):
    from browser import CHROMIUM, FLAGS

    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    page = browser.new_context(java_script_enabled=scripts).new_page()
    page.goto(html.resolve().as_uri())
    page.click("summary:has-text('tasks, hardest first')")
    return browser, page


def _tasks(page):
    """The per-task table (every data table of the report sorts; this one is checked)."""
    return page.locator("details", has_text="tasks, hardest first").locator("table.sortable")


def _first_column(page) -> list[str]:
    return _tasks(page).locator("tbody tr").evaluate_all("rows => rows.map(r => r.cells[0].textContent)")


@pytest.mark.parametrize("responder", ["resp-a", "resp-b"])
def test_click_sorts_task_table_by_a_responders_score(sorted_run, playwright, tmp_path, responder):
    run_dir, spec = sorted_run
    browser, page = _open(playwright, tmp_path, run_dir / "report.html")
    try:
        header = _tasks(page).locator("thead th", has_text=f"{responder}@")
        header.locator("button").click()
        assert _first_column(page) == _csv_order(run_dir, spec[responder], descending=False)
        assert header.get_attribute("aria-sort") == "ascending"
        header.locator("button").click()
        assert _first_column(page) == _csv_order(run_dir, spec[responder], descending=True)
        assert header.get_attribute("aria-sort") == "descending"
        # the task id column sorts as text (code points)
        _tasks(page).locator("thead th", has_text="task").first.locator("button").click()
        ids = _first_column(page)
        assert ids == sorted(ids) and EVIL in ids  # markup shown as the literal id
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.evaluate("document.scripts.length") == 1  # carebench's sorter only
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert sorted(ids) == sorted(metrics["task_scores"])
    finally:
        browser.close()


def test_task_table_is_complete_without_scripts(sorted_run, playwright, tmp_path):
    run_dir, _ = sorted_run
    browser, page = _open(playwright, tmp_path, run_dir / "report.html", scripts=False)
    try:
        ids = _first_column(page)
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert sorted(ids) == sorted(metrics["task_scores"]) and len(ids) == 6
        assert page.locator("table.sortable thead button").count() == 0  # no header of any table is a button
        assert page.locator(f"text={EVIL}").count() >= 1
    finally:
        browser.close()
