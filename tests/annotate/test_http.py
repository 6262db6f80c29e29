"""The annotation app over HTTP (in-process): sign-in, ownership, CSRF, strict forms,
escaping, welfare pages and exports. Stored state is checked with raw SQL on the
database file and exports are read back with the suites' own loaders."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from annotate.harness import (
    POLICY_ROWS,
    REVIEW_ROWS,
    SCRIPT,
    WebClient,
    criterion_rows,
    write_jsonl,
)
from carebench.annotate.app import create_app
from carebench.annotate.export import export_project
from carebench.annotate.kinds import load_sheet
from carebench.annotate.settings import load_settings
from carebench.annotate.store import Store
from carebench.cli import main
from carebench.datasets.prompts import load_annotations
from carebench.datasets.sheets import load_reviews
from carebench.support.calibration import load_labels
from carebench.types import CarebenchError

PEOPLE = {"P1": "peer", "C1": "clinician", "R1": "reviewer", "R2": "reviewer"}


def _make_env(tmp_path, settings_yaml: str = ""):
    db = tmp_path / "a.sqlite"
    store = Store(db)
    for name, rows, kind in (("policy", POLICY_ROWS, "policy"), ("review", REVIEW_ROWS, "review"),
                             ("crit", criterion_rows(3), "criterion")):
        path = write_jsonl(tmp_path / f"{name}.jsonl", rows)
        store.add_project(name, kind, load_sheet(path, kind), str(path))
    tokens = {n: store.add_annotator(n, role)[0] for n, role in PEOPLE.items()}
    settings_path = None
    if settings_yaml:
        settings_path = tmp_path / "settings.yaml"
        settings_path.write_text(settings_yaml)
    settings = load_settings(settings_path)
    app = create_app(store, settings)

    def client(name: str, ack: bool = True) -> WebClient:
        return WebClient(TestClient(app, base_url="http://127.0.0.1"), tokens[name], ack)

    return SimpleNamespace(db=db, store=store, tokens=tokens, client=client, app=app, settings=settings,
                           tmp=tmp_path)


@pytest.fixture
def env(tmp_path):
    e = _make_env(tmp_path)
    yield e
    e.store.close()


def n_labels(db, who: str | None = None) -> int:
    with sqlite3.connect(db) as con:
        q = ("SELECT count(*) FROM labels l JOIN assignments a ON a.id = l.assignment_id "
             "JOIN annotators n ON n.id = a.annotator_id")
        return con.execute(q + (" WHERE n.name = ?" if who else ""), (who,) if who else ()).fetchone()[0]


def aid(db, who: str, key: str) -> int:
    """The assignment id of one annotator's item, by raw SQL."""
    with sqlite3.connect(db) as con:
        return con.execute("SELECT a.id FROM assignments a JOIN items i ON i.id = a.item_id "
                           "JOIN annotators n ON n.id = a.annotator_id WHERE n.name = ? AND i.key = ?",
                           (who, key)).fetchone()[0]


POLICY_OK = [("action", "save"), ("intent", "INTENT_1"), ("intent", "INTENT_3"), ("suicidal_severity", "2"),
             ("function", "FUNCTION_1"), ("response", "RESPONSE_2"), ("response", "RESPONSE_6"),
             ("notes", "passive wish; <b>ambiguous</b>")]
REVIEW_OK = [("action", "save"), ("severity_preserved", "yes"), ("no_leakage", "yes"), ("format_ok", "no"),
             ("factual", "4"), ("persona_fit", "5"), ("style", "3"), ("context_fit", "2"),
             ("naturalness", "4"), ("notes", "reads like a query")]


# ---- sign-in and tokens -------------------------------------------------------------------


def test_login_by_link_unknown_and_revoked_tokens(env):
    http = TestClient(env.app, base_url="http://127.0.0.1")
    r = http.get("/login/not-a-real-token", follow_redirects=False)
    assert r.status_code == 403
    assert env.settings.support.url in r.text  # support resources on every page, errors too
    assert http.get("/", follow_redirects=False).status_code == 401

    c = env.client("P1", ack=False)
    assert c.http.get("/", follow_redirects=False).headers["location"] == "/notice"  # notice first
    case = aid(env.db, "P1", "case-1")
    assert c.http.get(f"/a/{case}", follow_redirects=False).headers["location"] == "/notice"

    env.store.revoke("P1")
    assert c.http.get("/", follow_redirects=False).status_code == 401  # open sessions end too
    again = TestClient(env.app, base_url="http://127.0.0.1")
    assert again.get(f"/login/{env.tokens['P1']}", follow_redirects=False).status_code == 403
    assert env.client("C1").http.get("/").status_code == 200  # others unaffected


def test_tokens_are_stored_hashed(env):
    c = env.client("C1")
    c.submit(aid(env.db, "C1", criterion_rows(3)[0]["item_id"]), [("action", "met")])
    with sqlite3.connect(env.db) as con:
        hashes = {h for (h,) in con.execute("SELECT token_hash FROM annotators")}
    assert hashes == {hashlib.sha256(t.encode()).hexdigest() for t in env.tokens.values()}
    raw = b"".join(p.read_bytes() for p in env.tmp.glob("a.sqlite*"))
    for token in env.tokens.values():
        assert token.encode() not in raw


def test_sqlite_is_wal_with_full_sync(env):
    with sqlite3.connect(env.db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with env.store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL


# ---- ownership ----------------------------------------------------------------------------


def test_other_annotators_case_url_is_forbidden(env):
    r1, p1 = env.client("R1"), env.client("P1")
    theirs = aid(env.db, "R2", "rw-2\u241fR2")
    r = r1.http.get(f"/a/{theirs}")
    assert r.status_code == 403
    assert REVIEW_ROWS[2]["text"] not in r.text
    assert r1.submit(theirs, REVIEW_OK).status_code == 403
    c1_case = aid(env.db, "C1", "case-1")
    assert p1.http.get(f"/a/{c1_case}").status_code == 403
    assert p1.submit(c1_case, POLICY_OK).status_code == 403
    assert p1.http.get("/a/999999").status_code == 404
    assert n_labels(env.db) == 0
    # R1 sees only the one rewrite assigned to R1, not R2's two
    home = r1.http.get("/").text
    assert "0 of 1 done" in home


# ---- CSRF, malformed and oversized forms ------------------------------------------------------


def test_forms_without_valid_csrf_are_rejected(env):
    p1, c1 = env.client("P1"), env.client("C1")
    case = aid(env.db, "P1", "case-1")
    assert p1.post(f"/a/{case}", POLICY_OK, csrf=False).status_code == 403
    assert p1.post(f"/a/{case}", [("csrf_token", "forged"), *POLICY_OK], csrf=False).status_code == 403
    assert p1.post(f"/a/{case}", [("csrf_token", c1.csrf), *POLICY_OK], csrf=False).status_code == 403
    assert p1.post("/withdraw", [("confirm", "yes")], csrf=False).status_code == 403
    assert p1.post("/logout", [], csrf=False).status_code == 403
    assert n_labels(env.db) == 0
    assert p1.http.get("/").status_code == 200  # not withdrawn, not signed out
    assert p1.submit(case, POLICY_OK).status_code == 303  # the real token works
    assert n_labels(env.db) == 1


def _raw_post(c: WebClient, path: str, body: bytes, ctype="application/x-www-form-urlencoded"):
    return c.http.post(path, content=body, headers={"content-type": ctype}, follow_redirects=False)


def test_malformed_and_oversized_forms_get_400_and_store_nothing(env):
    p1, r1, c1 = env.client("P1"), env.client("R1"), env.client("C1")
    pol, rev = aid(env.db, "P1", "case-1"), aid(env.db, "R1", "rw-1\u241fR1")
    crit = aid(env.db, "C1", criterion_rows(3)[0]["item_id"])
    bad = [
        (p1, pol, [("intent", "INTENT_9")]),                          # unknown code
        (p1, pol, [("evil", "1")]),                                   # unknown field
        (p1, pol, [("action", "save")]),                              # repeated single field
        (p1, pol, [("intent", "INTENT_2"), ("nssi_severity", "9")]),  # severity off the scale
        (p1, pol, [("intent", "INTENT_2"), ("nssi_severity", "two")]),
        (p1, pol, [("notes", "x" * 6000)]),                           # notes over the limit
        (r1, rev, [("factual", "6")]),
        (r1, rev, [("format_ok", "maybe")]),
        (c1, crit, []),
    ]
    for client, case, extra in bad:
        base = POLICY_OK if client is p1 else REVIEW_OK if client is r1 else [("action", "maybe")]
        r = client.submit(case, base + extra)
        assert r.status_code == 400, (extra, r.status_code)
    assert p1.submit(pol, [("action", "met"), *POLICY_OK[1:]]).status_code == 400  # not a policy button
    token = f"csrf_token={p1.csrf}".encode()
    for body in (token + b"&action=save&notes=%ff%fe", token + b"&&&", token + b"&action=save&" + b"a" * 70_000):
        assert _raw_post(p1, f"/a/{pol}", body).status_code == 400
    assert _raw_post(p1, f"/a/{pol}", token + b"&action=skip", "multipart/form-data; boundary=x").status_code == 400
    big = f"/a/{pol}"
    r = p1.http.post(big, content=token + b"&notes=" + b"y" * 200_000, follow_redirects=False,
                     headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 400
    assert n_labels(env.db) == 0


def test_taxonomy_rules_are_checked_on_submit_with_a_message(env):
    p1 = env.client("P1")
    case = aid(env.db, "P1", "case-2")
    both = [("action", "save"), ("intent", "INTENT_0"), ("intent", "INTENT_1"), ("function", "FUNCTION_2"),
            ("response", "RESPONSE_2")]
    r = p1.submit(case, both)
    assert r.status_code == 400
    assert "cannot be combined" in r.text
    assert 'value="INTENT_1" checked' in r.text  # what was entered is shown again
    no_sev = [("action", "save"), ("intent", "INTENT_2"), ("function", "FUNCTION_1"), ("response", "RESPONSE_2")]
    r = p1.submit(case, no_sev)
    assert r.status_code == 400 and "severity is required" in r.text
    r = p1.submit(case, [("action", "save"), ("intent", "INTENT_1")])
    assert r.status_code == 400 and "function: at least one code is required" in r.text
    assert n_labels(env.db) == 0
    # a severity left ticked under an unticked intent is dropped, not an error
    stale = [*POLICY_OK, ("nssi_severity", "4")]
    assert p1.submit(case, stale).status_code == 303
    out = env.tmp / "p.jsonl"
    export_project(env.store, out, "policy")
    (row,) = load_annotations(out)
    assert (row.nssi_severity, row.suicidal_severity) == (None, 2)


def test_dataset_text_is_escaped_and_scripts_are_forbidden(env):
    p1 = env.client("P1")
    r = p1.http.get(f"/a/{aid(env.db, 'P1', 'case-1')}")
    assert r.status_code == 200
    assert "<script" not in r.text.lower()
    assert "&lt;script&gt;window.__xss = 1; document.title = &#34;pwned&#34;" in r.text
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    # notes come back escaped too
    p1.submit(aid(env.db, "P1", "case-1"), [*POLICY_OK[:-1], ("notes", SCRIPT)])
    r = p1.http.get(f"/a/{aid(env.db, 'P1', 'case-1')}")
    assert "<script" not in r.text.lower() and "&lt;script&gt;" in r.text


# ---- welfare --------------------------------------------------------------------------------


def test_notice_break_and_support_link_on_every_page(tmp_path):
    env = _make_env(tmp_path, "session_cases: 2\nsupport:\n  text: Call the study line.\n"
                              "  url: tel:+6500000000\n")
    try:
        c1 = env.client("C1", ack=False)
        pages = [c1.http.get("/notice")]
        c1.post("/notice", [])
        keys = [r["item_id"] for r in criterion_rows(3)]
        first = aid(env.db, "C1", keys[0])
        pages.append(c1.http.get(f"/a/{first}"))
        assert "0 of 3 done" in pages[-1].text
        r = c1.submit(first, [("action", "met")])
        assert r.headers["location"] == f"/a/{aid(env.db, 'C1', keys[1])}"
        r = c1.submit(aid(env.db, "C1", keys[1]), [("action", "skip")])
        assert r.headers["location"] == "/break"  # two cases: the block is over
        pages.append(c1.http.get("/break"))
        assert "break" in pages[-1].text.lower()
        assert c1.http.get(f"/a/{aid(env.db, 'C1', keys[2])}", follow_redirects=False).headers[
            "location"] == "/break"
        r = c1.post("/break", [])
        assert (r.status_code, r.headers["location"]) == (303, "/")
        pages.append(c1.http.get(f"/a/{aid(env.db, 'C1', keys[2])}"))  # a new block
        assert "1 of 3 done, 1 skipped" in pages[-1].text  # a skipped case is not done
        pages += [c1.http.get("/"), c1.http.get("/withdraw"), c1.http.get("/a/424242"),
                  TestClient(env.app).get("/"), TestClient(env.app).get("/login/nope")]
        for page in pages:
            assert "Call the study line." in page.text and 'href="tel:+6500000000"' in page.text
    finally:
        env.store.close()


def test_skip_and_withdraw_without_penalty(env):
    p1, c1 = env.client("P1"), env.client("C1")
    p1.submit(aid(env.db, "P1", "case-1"), POLICY_OK)
    c1.submit(aid(env.db, "C1", "case-1"), POLICY_OK)
    c1.submit(aid(env.db, "C1", "case-2"), [("action", "skip")])
    assert n_labels(env.db, "C1") == 2
    r = c1.post("/withdraw", [("confirm", "yes")])
    assert r.status_code == 200 and "withdrawn" in r.text.lower()
    assert n_labels(env.db, "C1") == 0
    out = env.tmp / "p.jsonl"
    export_project(env.store, out, "policy")
    assert [(a.practitioner, a.case_id) for a in load_annotations(out)] == [("P1", "case-1")]
    fresh = TestClient(env.app, base_url="http://127.0.0.1")
    assert fresh.get(f"/login/{env.tokens['C1']}", follow_redirects=False).status_code == 403


# ---- exports ----------------------------------------------------------------------------------


def test_exports_equal_the_submissions_in_each_suites_format(env):
    p1, c1, r1 = env.client("P1"), env.client("C1"), env.client("R1")
    keys = [r["item_id"] for r in criterion_rows(3)]
    p1.submit(aid(env.db, "P1", "case-1"), [("action", "save"), ("intent", "INTENT_2"), ("nssi_severity", "5"),
                                             ("function", "FUNCTION_U"), ("response", "RESPONSE_1")])
    p1.submit(aid(env.db, "P1", "case-1"), POLICY_OK)  # a revision replaces the first answer
    p1.submit(aid(env.db, "P1", "case-2"), [("action", "skip"), ("notes", "too close to home")])
    c1.submit(aid(env.db, "C1", keys[0]), [("action", "met")])
    c1.submit(aid(env.db, "C1", keys[1]), [("action", "not_met")])
    c1.submit(aid(env.db, "C1", keys[2]), [("action", "skip")])
    r1.submit(aid(env.db, "R1", "rw-1\u241fR1"), REVIEW_OK)

    out = env.tmp / "policy.jsonl"
    assert main(["annotate", "export", "--db", str(env.db), "--project", "policy", "--out", str(out)]) == 0
    got = [a.model_dump() for a in load_annotations(out)]
    assert got == [
        {"practitioner": "P1", "archetype": "peer", "case_id": "case-1", "intent": ["INTENT_1", "INTENT_3"],
         "nssi_severity": None, "suicidal_severity": 2, "function": ["FUNCTION_1"],
         "response": ["RESPONSE_2", "RESPONSE_6"], "notes": "passive wish; <b>ambiguous</b>", "skipped": False},
        {"practitioner": "P1", "archetype": "peer", "case_id": "case-2", "intent": [], "nssi_severity": None,
         "suicidal_severity": None, "function": [], "response": [], "notes": "too close to home",
         "skipped": True},
    ]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["private"] is True and meta["rows"] == 2

    out = env.tmp / "crit.jsonl"
    export_project(env.store, out, "crit")
    labels = load_labels(out)  # what `carebench support calibrate --labels` reads
    assert list(zip(labels["task_id"], labels["response_id"], labels["criterion_id"], labels["rater"],
                    labels["met"], strict=True)) == [("t0", "resp-a#0", "k0", "C1", 1),
                                                     ("t1", "resp-a#0", "k1", "C1", 0)]

    out = env.tmp / "review.jsonl"
    s = export_project(env.store, out, "review")
    (rev,) = load_reviews(out)
    assert rev.model_dump() == {"item_id": "rw-1", "reviewer": "R1", "severity_preserved": True,
                                "no_leakage": True, "format_ok": False, "factual": 4, "persona_fit": 5,
                                "style": 3, "context_fit": 2, "naturalness": 4, "notes": "reads like a query"}
    assert s.skipped_left_out == 0

    out = env.tmp / "one.jsonl"
    export_project(env.store, out, "policy", annotator="C1")
    assert out.read_text() == ""


def test_review_sheet_hides_the_rewriter(tmp_path):
    rows = [dict(REVIEW_ROWS[0], rewriter="secret-model-x")]
    env = _make_env(tmp_path)
    try:
        path = write_jsonl(tmp_path / "blind.jsonl", rows)
        env.store.add_project("blind", "review", load_sheet(path, "review"), str(path))
        with sqlite3.connect(env.db) as con:
            assert b"secret-model-x" not in b"".join(
                p.encode() for (p,) in con.execute("SELECT payload FROM items"))
    finally:
        env.store.close()


# ---- command line -------------------------------------------------------------------------------


def test_cli_errors_are_one_line(tmp_path, capsys):
    db = str(tmp_path / "x.sqlite")
    assert main(["annotate", "export", "--db", db, "--out", str(tmp_path / "o.jsonl")]) == 2
    assert main(["annotate", "add-annotator", "--db", db, "--name", "A", "--role", "admin"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(POLICY_ROWS[0]) + "\n" + json.dumps({**POLICY_ROWS[1], "text": ""}) + "\n")
    assert main(["annotate", "load", "--db", db, "--project", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("carebench: error: ") for line in err)
    assert "no such database" in err[0]
    assert "--role 'admin'" in err[1]
    assert str(bad) in err[2] and "line 2" in err[2] and "text" in err[2]
    with pytest.raises(CarebenchError, match="session_cases"):
        (tmp_path / "s.yaml").write_text("session_cases: 0\n")
        load_settings(tmp_path / "s.yaml")
    with pytest.raises(CarebenchError, match="colour"):
        (tmp_path / "s.yaml").write_text("colour: red\n")
        load_settings(tmp_path / "s.yaml")


def test_assignments_follow_roles_whichever_comes_first(tmp_path):
    store = Store(tmp_path / "a.sqlite")
    try:
        early = {n: store.add_annotator(n, role)[1] for n, role in PEOPLE.items()}
        assert set(early.values()) == {0}
        for name, rows, kind in (("policy", POLICY_ROWS, "policy"), ("review", REVIEW_ROWS, "review"),
                                 ("crit", criterion_rows(4), "criterion")):
            store.add_project(name, kind, load_sheet(write_jsonl(tmp_path / f"{name}.jsonl", rows), kind))
        _, late = store.add_annotator("P2", "clinician")
        with sqlite3.connect(tmp_path / "a.sqlite") as con:
            got = dict(con.execute("SELECT n.name, count(*) FROM assignments a JOIN annotators n "
                                   "ON n.id = a.annotator_id GROUP BY n.name"))
        # practitioners: all 3 cases; clinicians also the 4 criteria; reviewers their own rows
        assert got == {"P1": 3, "C1": 3 + 4, "R1": 1, "R2": 2, "P2": 3 + 4}
        assert late == 7
    finally:
        store.close()


# ---- methods, bad ids, error pages and file modes ----------------------------------------


def test_head_is_answered_like_get_and_never_stores(env):
    """HEAD once took the save branch: with a form body and a valid token it stored a label."""
    p1 = env.client("P1")
    case = aid(env.db, "P1", "case-1")
    from urllib.parse import urlencode

    body = urlencode([("csrf_token", p1.csrf), *POLICY_OK]).encode()
    r = p1.http.request("HEAD", f"/a/{case}", content=body,
                        headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 200 and r.content == b""
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert n_labels(env.db) == 0
    assert p1.http.get(f"/a/{case}").status_code == 200
    assert p1.http.request("PUT", f"/a/{case}", content=body).status_code == 405
    assert n_labels(env.db) == 0
    assert p1.submit(case, POLICY_OK).status_code == 303  # POST still saves
    assert n_labels(env.db) == 1


@pytest.mark.parametrize("path", ["/a/9223372036854775808", "/a/99999999999999999999999", "/a/-1", "/a/0",
                                  "/a/abc"])
def test_case_ids_beyond_the_database_are_404_with_the_security_headers(env, path):
    p1 = env.client("P1")
    r = p1.http.get(path)
    assert r.status_code == 404
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert r.headers["x-content-type-options"] == "nosniff"


def test_error_pages_carry_the_security_headers(env, monkeypatch):
    client = TestClient(env.app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    r = client.get("/no/such/page")
    assert r.status_code == 404
    for h in ("content-security-policy", "x-content-type-options"):
        assert h in r.headers, h
    r = client.post("/healthz")
    assert r.status_code == 405 and "x-content-type-options" in r.headers and "GET" in r.headers["allow"]
    p1 = WebClient(client, env.tokens["P1"])

    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(env.store, "case", broken)
    r = p1.http.get(f"/a/{aid(env.db, 'P1', 'case-1')}")
    assert r.status_code == 500 and "disk on fire" not in r.text
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert r.headers["x-content-type-options"] == "nosniff"


def test_database_and_its_wal_files_are_owner_only(env):
    p1 = env.client("P1")
    assert p1.submit(aid(env.db, "P1", "case-1"), POLICY_OK).status_code == 303  # WAL in use
    files = [env.db, env.db.with_name(env.db.name + "-wal"), env.db.with_name(env.db.name + "-shm")]
    assert all(f.exists() for f in files)
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
