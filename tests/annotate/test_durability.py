"""A real server process: acknowledged labels survive SIGKILL, and 20 annotators
submitting at once lose nothing and duplicate nothing. Checked against the export
(read back by the suites' own loaders) and raw SQL on the database file."""

from __future__ import annotations

import sqlite3
import zlib

from annotate.harness import (
    ServerProcess,
    WebClient,
    cli,
    concurrent_submissions,
    criterion_rows,
    write_jsonl,
)
from carebench.annotate.store import Store
from carebench.datasets.sheets import load_criterion_labels


def _item_of_assignment(db, aid: int) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT i.key FROM assignments a JOIN items i ON i.id = a.item_id "
                           "WHERE a.id = ?", (aid,)).fetchone()[0]


def test_sigkill_between_two_submissions_keeps_both(tmp_path):
    db = tmp_path / "a.sqlite"
    store = Store(db)
    store.add_project("crit", "criterion", [(r["item_id"], r) for r in criterion_rows(3)])
    token, _ = store.add_annotator("C1", "clinician")
    store.close()

    server = ServerProcess(db).start()
    try:
        assert server.url.startswith("http://127.0.0.1:")  # loopback unless told otherwise
        c = WebClient(server.url, token)
        first = c.case_ids()[0]
        r = c.submit(first, [("action", "met")])
        assert r.status_code == 303  # acknowledged: the page moves on
        c.close()
        server.kill()  # SIGKILL right after the acknowledgement
        assert server.proc.returncode == -9
    finally:
        server.stop()

    with ServerProcess(db) as server:
        c = WebClient(server.url, token)  # the same link still signs in
        second = c.case_ids()[0]
        assert second != first
        assert c.submit(second, [("action", "not_met")]).status_code == 303
        c.close()
        server.kill()

    out = tmp_path / "labels.jsonl"
    cli("export", "--db", str(db), "--out", str(out))
    got = {(r.criterion_id, r.met) for r in load_criterion_labels(out)}
    assert got == {("k0", True), ("k1", False)}


def test_1000_labels_from_20_concurrent_clients(tmp_path):
    db = tmp_path / "a.sqlite"
    sheet = write_jsonl(tmp_path / "crit.jsonl", criterion_rows(50))
    settings = tmp_path / "settings.yaml"
    settings.write_text("session_cases: 1000\n")
    cli("load", "--db", str(db), "--project", str(sheet))
    store = Store(db)  # 20 links at once (the CLI path is tested above)
    tokens = {f"C{i:02d}": store.add_annotator(f"C{i:02d}", "clinician")[0] for i in range(20)}
    store.close()

    def answer(name: str, aid: int) -> bool:
        return zlib.crc32(f"{name}/{aid}".encode()) % 2 == 0

    with ServerProcess(db, settings) as server:
        res = concurrent_submissions(server.url, tokens, per_client=50, answer=answer, browse=False)
    print(f"1000 submissions from 20 clients in {res['wall']:.1f} s")
    assert res["failures"] == []
    assert len(res["sent"]) == 1000

    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM labels").fetchone()[0] == 1000
        assert con.execute("SELECT max(revision) FROM labels").fetchone()[0] == 1  # nothing written twice

    out = tmp_path / "labels.jsonl"
    cli("export", "--db", str(db), "--out", str(out))
    labels = load_criterion_labels(out)
    assert len(labels) == 1000
    exported = {(r.rater, r.criterion_id): r.met for r in labels}
    assert len(exported) == 1000  # no (rater, criterion) twice
    key_to_criterion = {row["item_id"]: row["criterion_id"] for row in criterion_rows(50)}
    expected = {(name, key_to_criterion[_item_of_assignment(db, aid)]): met
                for name, aid, met in res["sent"]}
    assert exported == expected
