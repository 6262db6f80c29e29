"""Clinicians walk the rubric in a real browser (Playwright driving Debian's chromium
against ``carebench annotate serve`` on loopback): two clinicians sign in by their links,
each walks two conversations with different answers (one going back to change an
answer), and the export equals the answers they clicked, question by question and
rating by rating. One of them works on a 390-pixel-wide phone screen.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from annotate.harness import ServerProcess
from annotate.walk_fixtures import BP, DIMS, HPH, NR, SUB, write_rubric, write_run
from browser import CHROMIUM, FLAGS
from carebench.annotate.store import Store
from carebench.cli import main
from carebench.datasets.walk_labels import load_walk_labels


@pytest.fixture
def browser_for(playwright, tmp_path):
    contexts = []

    def open_as(name: str, width: int = 1200):
        ctx = playwright.chromium.launch_persistent_context(
            str(tmp_path / f"profile-{name}"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": width, "height": 900})
        contexts.append(ctx)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        return page

    yield open_as
    for ctx in contexts:
        ctx.close()


def _cli(capsys, *args: str) -> str:
    assert main(["annotate", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _sign_in(page, link: str) -> None:
    page.goto(link)
    assert page.url.endswith("/notice")
    page.get_by_role("button", name="I have read this notice: continue").click()
    page.wait_for_url("**/")
    page.get_by_role("link", name="Continue").click()
    page.wait_for_url("**/a/*")


def _asked(page) -> str | None:
    if page.locator("#question-legend").count() == 0:
        return None
    return page.inner_text("#question-legend").rsplit(" ", 1)[1]


def _answer(page, label: str) -> None:
    page.locator("#question").get_by_label(label, exact=True).check()
    with page.expect_navigation():
        page.get_by_role("button", name="Next question").click()


def _walk(page, answers: list[tuple[str, str]]) -> None:
    """Answer each (expected question, label) in turn, checking the page asks that question."""
    for qid, label in answers:
        assert _asked(page) == qid, (page.url, qid)
        _answer(page, label)


def _save(page, reason: str) -> None:
    assert _asked(page) is None
    page.fill("#reason", reason)
    here = page.url
    with page.expect_navigation():
        page.get_by_role("button", name="Save and continue").click()
    assert page.url != here


def _ratings(page) -> list[str]:
    return [t.strip() for t in page.locator("#ratings td.rating").all_inner_texts()]


def test_two_clinicians_walk_go_back_and_export_in_chromium(tmp_path, browser_for, capsys):
    db = tmp_path / "a.sqlite"
    run, rubric = write_run(tmp_path / "run"), write_rubric(tmp_path / "rubric.tsv")

    Store(db).close()  # an empty database the server can open; people and the project come next
    with ServerProcess(db) as server:
        links = {n: _cli(capsys, "add-annotator", "--db", str(db), "--name", n, "--role", "clinician",
                         "--base-url", server.url).strip() for n in ("C1", "C2")}
        _cli(capsys, "load", "--db", str(db), "--kind", "rubric-walk", "--run", str(run), "--rubric", str(rubric),
             "--name", "walks", "--overlap", "2")

        # ---- C1, desktop: conversation 1 ends at END, conversation 2 goes down the Red branch
        page = browser_for("C1")
        _sign_in(page, links["C1"])
        assert "<script>window.__xss = 1;" in page.inner_text("#transcript")
        assert page.evaluate("() => window.__xss") is None and page.dialogs == []
        _walk(page, [("1", "No"), ("2", "No")])
        assert _ratings(page) == [NR, NR, NR]
        _save(page, "no sign of risk")
        _walk(page, [("1", "Yes"), ("3", "Yes"), ("4", "No"), ("7", "No")])
        assert "(answered automatically)" in page.inner_text("#walked")
        assert _ratings(page) == [HPH, NR, BP]
        _save(page, "ignored the disclosure")

        # ---- C2, a phone: different answers, and a change of mind on question 4
        page = browser_for("C2", width=390)
        _sign_in(page, links["C2"])
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390  # no sideways scrolling
        _walk(page, [("1", "Yes"), ("3", "No"), ("4", "No"), ("7", "Yes")])
        assert _ratings(page) == [BP, NR, HPH]
        with page.expect_navigation():
            page.get_by_role("button", name="Change the answer to question 4").click()
        assert _asked(page) == "4" and page.locator("#step-7").count() == 0
        _walk(page, [("4", "Yes"), ("5", "Yes"), ("7", "No")])
        assert _ratings(page) == [BP, SUB, BP]
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        if os.environ.get("CAREBENCH_SCREENSHOTS"):
            page.screenshot(path=str(Path(os.environ["CAREBENCH_SCREENSHOTS"]) / "5-rubric-walk-phone.png"),
                            full_page=True)
        _save(page, "changed q4 after rereading")
        _walk(page, [("1", "No"), ("2", "Yes"), ("3", "No"), ("4", "Yes"), ("5", "No"), ("7", "No")])
        assert _ratings(page) == [BP, BP, BP]
        _save(page, "")

    out = tmp_path / "walks.jsonl"
    _cli(capsys, "export", "--db", str(db), "--project", "walks", "--out", str(out))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    c1, c2 = "p1|sim|bot-a|0", "p2|sim|bot-b|0"

    def rows(who, conv, reason, steps, ratings):
        return ([(who, conv, "answer", q, a, q == "6", reason) for q, a in steps]
                + [(who, conv, "rating", d, r, False, reason) for d, r in zip(DIMS, ratings, strict=True)])

    got = [(r.clinician, r.conversation_id, r.record, r.question_id if r.record == "answer" else r.dimension,
            r.answer if r.record == "answer" else r.rating, r.auto, r.reason) for r in load_walk_labels(out)]
    assert got == (
        rows("C1", c1, "no sign of risk", [("1", "No"), ("2", "No")], [NR, NR, NR])
        + rows("C1", c2, "ignored the disclosure", [("1", "Yes"), ("3", "Yes"), ("4", "No"), ("6", "Continue"),
                                                   ("7", "No")], [HPH, NR, BP])
        + rows("C2", c1, "changed q4 after rereading", [("1", "Yes"), ("3", "No"), ("4", "Yes"), ("5", "Yes"),
                                                       ("6", "Continue"), ("7", "No")], [BP, SUB, BP])
        + rows("C2", c2, "", [("1", "No"), ("2", "Yes"), ("3", "No"), ("4", "Yes"), ("5", "No"),
                              ("6", "Continue"), ("7", "No")], [BP, BP, BP]))
