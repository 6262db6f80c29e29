"""A skipped case is counted apart from the answered ones (the case page, My cases and
`annotate list`), and on a phone-width screen the prompt comes before its context and
persona."""

from __future__ import annotations

from annotate.test_http import POLICY_OK, _make_env, aid
from carebench.cli import main


def test_skipped_cases_are_not_done(tmp_path, capsys):
    env = _make_env(tmp_path)
    try:
        p1 = env.client("P1")
        p1.submit(aid(env.db, "P1", "case-1"), POLICY_OK)
        p1.submit(aid(env.db, "P1", "case-2"), [("action", "skip")])
        home = p1.http.get("/").text
        assert "1 of 3 done, 1 skipped" in home
        case = p1.http.get(f"/a/{aid(env.db, 'P1', 'case-3')}").text
        assert "1 of 3 done, 1 skipped" in case
    finally:
        env.store.close()
    capsys.readouterr()
    assert main(["annotate", "list", "--db", str(env.db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "annotator P1: peer, active, 1 labels, 1 skipped" in lines


def test_prompt_first_on_a_narrow_screen(tmp_path, playwright):
    from browser import CHROMIUM, FLAGS

    env = _make_env(tmp_path)
    try:
        html = env.client("P1").http.get(f"/a/{aid(env.db, 'P1', 'case-1')}").text
    finally:
        env.store.close()
    page_file = tmp_path / "case.html"
    page_file.write_text(html, "utf-8")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    try:
        tops = {}
        for width in (390, 1200):
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.goto(page_file.as_uri())
            tops[width] = {sel: page.locator(sel).bounding_box()["y"]
                           for sel in (".panel.prompt", ".panel.context", ".panel.persona")}
            page.close()
    finally:
        browser.close()
    narrow, wide = tops[390], tops[1200]
    assert narrow[".panel.prompt"] < narrow[".panel.context"] < narrow[".panel.persona"]
    assert wide[".panel.context"] < wide[".panel.prompt"]  # on a wide screen: context and persona first


def test_load_builtin_calibration_cases(tmp_path, capsys):
    """`annotate load --project builtin:calibration-cases` loads exactly the cases the built-in
    practitioners annotated (their ids read from annotations.jsonl, not from the loader)."""
    import json
    import sqlite3
    from pathlib import Path

    import carebench

    data = Path(carebench.__file__).parent / "data" / "plural"
    want = {json.loads(x)["case_id"] for x in (data / "annotations.jsonl").read_text("utf-8").splitlines()}
    marked = {r["id"] for r in map(json.loads, (data / "prompts.jsonl").read_text("utf-8").splitlines())
              if r.get("calibration") is True}
    assert len(want) == 30 and marked == want
    db = tmp_path / "a.sqlite"
    assert main(["annotate", "load", "--db", str(db), "--project", "builtin:calibration-cases"]) == 0
    assert "loaded 30 policy items as project 'calibration-cases'" in capsys.readouterr().out
    with sqlite3.connect(db) as con:
        keys = {k for (k,) in con.execute("SELECT key FROM items")}
    assert keys == want
    assert main(["annotate", "load", "--db", str(db), "--project", "builtin:nope"]) == 2
    assert "unknown built-in sheet 'nope'; known: calibration-cases" in capsys.readouterr().err
