"""End to end in a real browser: Playwright drives Debian's chromium (headless, no
browser download) against ``carebench annotate serve`` on loopback. Each annotator
signs in by their link, labels a case in their mode, reloads it, and the export is
compared with what was clicked. Screenshots of each mode go to
$CAREBENCH_SCREENSHOTS (or a temporary directory, printed).

In CI (CI=true) a missing chromium or Playwright fails these tests instead of
skipping them: .ci/run installs the Debian package.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from annotate.harness import POLICY_ROWS, REVIEW_ROWS, ServerProcess, criterion_rows, write_jsonl
from browser import CHROMIUM, FLAGS
from carebench.cli import main
from carebench.datasets.prompts import load_annotations
from carebench.datasets.sheets import load_criterion_labels, load_reviews


@pytest.fixture
def browser_for(playwright, tmp_path):
    """A fresh chromium profile (--user-data-dir) per annotator."""
    contexts = []

    def open_as(name: str):
        ctx = playwright.chromium.launch_persistent_context(
            str(tmp_path / f"profile-{name}"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1200, "height": 900})
        contexts.append(ctx)
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        return page

    yield open_as
    for ctx in contexts:
        ctx.close()


@pytest.fixture
def screens(tmp_path):
    path = Path(os.environ.get("CAREBENCH_SCREENSHOTS") or tmp_path / "screens")
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nannotate screenshots: {path}")
    return path


def _cli(capsys, *args: str) -> str:
    assert main(["annotate", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _sign_in(page, link: str, screens: Path | None = None) -> None:
    page.goto(link)
    assert page.url.endswith("/notice")  # the content notice comes before the first case
    assert page.locator("#support a").get_attribute("href") == "https://findahelpline.com"
    if screens is not None:
        page.screenshot(path=str(screens / "0-notice.png"), full_page=True)
    page.get_by_role("button", name="I have read this notice: continue").click()
    page.wait_for_url("**/")


def test_label_each_mode_in_chromium_reload_and_export(tmp_path, browser_for, screens, capsys):
    db = tmp_path / "a.sqlite"
    for name, rows in (("policy", POLICY_ROWS), ("review", REVIEW_ROWS), ("crit", criterion_rows(3))):
        _cli(capsys, "load", "--db", str(db), "--project", str(write_jsonl(tmp_path / f"{name}.jsonl", rows)))

    with ServerProcess(db) as server:
        def link(name: str, role: str) -> str:
            out = _cli(capsys, "add-annotator", "--db", str(db), "--name", name, "--role", role,
                       "--base-url", server.url)
            return out.strip()

        # ---- policy mode (peer practitioner) -------------------------------------------------
        page = browser_for("P1")
        _sign_in(page, link("P1", "peer"), screens)
        page.get_by_role("link", name="Continue").click()
        case_url = page.url
        assert "0 of 3 done" in page.inner_text("#progress")
        # the prompt's <script> is shown as text and never runs
        assert "<script>window.__xss = 1;" in page.inner_text("#prompt-text")
        assert page.evaluate("() => window.__xss") is None
        assert page.title() != "pwned" and page.dialogs == []
        assert "Counselor chat" in page.inner_text(".context")
        # a combination the taxonomy forbids is refused with a message, the ticks kept
        page.check("#intent-INTENT_0")
        page.check("#intent-INTENT_1")
        page.get_by_role("button", name="Save and continue").click()
        assert "cannot be combined" in page.inner_text(".errors")
        assert page.is_checked("#intent-INTENT_1")
        page.screenshot(path=str(screens / "1b-policy-refused.png"), full_page=True)
        page.uncheck("#intent-INTENT_0")
        page.uncheck("#intent-INTENT_1")
        # severities appear only when their intent is ticked (CSS only, no script)
        assert not page.is_visible("#nssi_severity-3")
        page.check("#intent-INTENT_2")
        assert page.is_visible("#nssi_severity-3") and not page.is_visible("#suicidal_severity-4")
        page.check("#nssi_severity-3")
        page.check("#intent-INTENT_3")
        page.check("#suicidal_severity-4")
        for code in ("function-FUNCTION_1", "function-FUNCTION_4", "response-RESPONSE_2", "response-RESPONSE_5"):
            page.check(f"#{code}")
        page.fill("#notes", "ambiguous: 'make it stop' could be passive or active")
        page.screenshot(path=str(screens / "1-policy.png"), full_page=True)
        page.get_by_role("button", name="Save and continue").click()
        page.wait_for_url(lambda url: url != case_url)
        assert "1 of 3 done" in page.inner_text("#progress")
        page.goto(case_url)
        page.reload()
        for box in ("intent-INTENT_2", "intent-INTENT_3", "nssi_severity-3", "suicidal_severity-4",
                    "function-FUNCTION_1", "function-FUNCTION_4", "response-RESPONSE_2", "response-RESPONSE_5"):
            assert page.is_checked(f"#{box}"), box
        assert not page.is_checked("#intent-INTENT_1")
        assert page.input_value("#notes") == "ambiguous: 'make it stop' could be passive or active"

        # ---- review mode (blind rewrite review) -------------------------------------------------
        page = browser_for("R1")
        _sign_in(page, link("R1", "reviewer"))
        assert "0 of 1 done" in page.inner_text("main")  # only R1's own rewrite
        page.get_by_role("link", name="Continue").click()
        case_url = page.url
        assert page.inner_text("#source-text") == REVIEW_ROWS[0]["source_text"]
        assert page.inner_text("#rewrite-text") == REVIEW_ROWS[0]["text"]
        for group, value in (("Severity preserved", "Yes"), ("No leakage", "Yes"),
                             ("Format fits the context", "No"), ("Factual faithfulness", "4"),
                             ("Persona fit", "5"), ("Style", "3"), ("Context fit", "2"), ("Naturalness", "4")):
            page.get_by_role("radiogroup", name=group).get_by_label(value, exact=True).check()
        page.fill("#notes", "fine, slightly terse")
        page.screenshot(path=str(screens / "2-review.png"), full_page=True)
        page.get_by_role("button", name="Save and continue").click()
        page.wait_for_url("**/")
        assert "1 of 1 done" in page.inner_text("main")
        page.goto(case_url)
        assert page.get_by_role("radiogroup", name="Format fits the context").get_by_label("No").is_checked()
        assert page.get_by_role("radiogroup", name="Persona fit").get_by_label("5").is_checked()

        # ---- criterion mode (clinician, one criterion at a time) ---------------------------------
        page = browser_for("C1")
        _sign_in(page, link("C1", "clinician"))
        page.locator(".panel", has=page.locator("h2", has_text="crit")).get_by_role("link", name="Continue").click()
        first_url = page.url
        assert page.inner_text("#criterion-text") == criterion_rows(3)[0]["criterion_text"]
        assert page.inner_text("#reply-text") == criterion_rows(3)[0]["reply"]
        page.screenshot(path=str(screens / "3-criterion.png"), full_page=True)
        page.get_by_role("button", name="Met", exact=True).click()
        page.wait_for_url(lambda url: url != first_url)
        assert page.inner_text("#criterion-text") == criterion_rows(3)[1]["criterion_text"]
        page.get_by_role("button", name="Not met").click()
        page.wait_for_url(lambda url: "/a/" in url and url != first_url)
        page.goto(first_url)
        page.reload()
        assert page.inner_text("#saved-answer") == "Your saved answer: Met"
        page.goto(server.url + "/")
        page.screenshot(path=str(screens / "4-home.png"), full_page=True)

    # ---- exports equal what was clicked --------------------------------------------------------
    out = tmp_path / "policy-labels.jsonl"
    _cli(capsys, "export", "--db", str(db), "--project", "policy", "--out", str(out))
    assert [a.model_dump() for a in load_annotations(out)] == [{
        "practitioner": "P1", "archetype": "peer", "case_id": "case-1", "intent": ["INTENT_2", "INTENT_3"],
        "nssi_severity": 3, "suicidal_severity": 4, "function": ["FUNCTION_1", "FUNCTION_4"],
        "response": ["RESPONSE_2", "RESPONSE_5"], "notes": "ambiguous: 'make it stop' could be passive or active",
        "skipped": False}]
    out = tmp_path / "reviews.jsonl"
    _cli(capsys, "export", "--db", str(db), "--project", "review", "--out", str(out))
    assert [r.model_dump() for r in load_reviews(out)] == [{
        "item_id": "rw-1", "reviewer": "R1", "severity_preserved": True, "no_leakage": True, "format_ok": False,
        "factual": 4, "persona_fit": 5, "style": 3, "context_fit": 2, "naturalness": 4,
        "notes": "fine, slightly terse"}]
    out = tmp_path / "criterion-labels.jsonl"
    _cli(capsys, "export", "--db", str(db), "--project", "crit", "--out", str(out))
    assert [r.model_dump() for r in load_criterion_labels(out)] == [
        {"task_id": "t0", "response_id": "resp-a#0", "criterion_id": "k0", "rater": "C1", "met": True},
        {"task_id": "t1", "response_id": "resp-a#0", "criterion_id": "k1", "rater": "C1", "met": False}]

