"""Clinicians walking a rubric in annotate, over HTTP (in-process): loading a converse run
with overlap, the walk order on a VERA-MH-shaped rubric (END, NOT_RELEVANT>>, Auto Answer)
worked by hand, going back (later answers dropped, the rest re-asked), stale and
cross-site forms refused with nothing stored, escaping, and the 0600 export read back
with its own loader. Stored state is checked with raw SQL on the database file."""

from __future__ import annotations

import json
import re
import sqlite3
import stat

import pytest
from starlette.testclient import TestClient

from annotate.harness import SCRIPT, WebClient
from annotate.walk_fixtures import BP, DIMS, HPH, NR, SUB, write_rubric, write_run
from carebench.annotate.app import create_app
from carebench.annotate.export import export_project
from carebench.annotate.settings import load_settings
from carebench.annotate.store import Store
from carebench.annotate.walks import load_run
from carebench.cli import main
from carebench.datasets.walk_labels import load_walk_labels

ASKED = re.compile(r"question (\w+)</legend>")


@pytest.fixture
def env(tmp_path):
    db = tmp_path / "a.sqlite"
    store = Store(db)
    tokens = {n: store.add_annotator(n, r)[0] for n, r in (("C1", "clinician"), ("C2", "clinician"),
                                                           ("C3", "clinician"), ("P1", "peer"))}
    rows = load_run(write_run(tmp_path / "run"), str(write_rubric(tmp_path / "rubric.tsv")), overlap=2)
    store.add_project("walks", "rubric-walk", rows, "run")
    app = create_app(store, load_settings())

    def client(name: str) -> WebClient:
        return WebClient(TestClient(app, base_url="http://127.0.0.1"), tokens[name])

    return db, store, client


def _assignments(db) -> dict[str, list[str]]:
    con = sqlite3.connect(db)
    out: dict[str, list[str]] = {}
    for name, key in con.execute("SELECT annotators.name, items.key FROM assignments JOIN annotators ON "
                                 "annotators.id = assignments.annotator_id JOIN items ON items.id = "
                                 "assignments.item_id ORDER BY assignments.id"):
        out.setdefault(name, []).append(key)
    con.close()
    return out


def _labels(db) -> list[tuple]:
    con = sqlite3.connect(db)
    rows = con.execute("SELECT annotators.name, items.key, labels.skipped, labels.payload FROM labels "
                       "JOIN assignments ON assignments.id = labels.assignment_id JOIN annotators ON "
                       "annotators.id = assignments.annotator_id JOIN items ON items.id = assignments.item_id "
                       "ORDER BY labels.id").fetchall()
    con.close()
    return [(n, k, bool(s), json.loads(p)) for n, k, s, p in rows]


class Walker:
    """One clinician's walk of one conversation, as the page's form posts it."""

    def __init__(self, client: WebClient, aid: int):
        self.c, self.aid, self.given = client, aid, []
        self.page = client.http.get(f"/a/{aid}").text

    def asked(self) -> str | None:
        m = ASKED.search(self.page)
        return m.group(1) if m else None

    def _post(self, action: str, extra=()):
        r = self.c.submit(self.aid, [(k, v) for q, a in self.given for k, v in (("qid", q), ("ans", a))]
                          + list(extra) + [("action", action)])
        return r

    def answer(self, label: str) -> None:
        qid = self.asked()
        r = self._post("next", [("answer", label)])
        assert r.status_code == 200, r.text
        self.given.append((qid, label))
        self.page = r.text

    def back(self, index: int) -> None:
        r = self._post(f"back-{index}")
        assert r.status_code == 200, r.text
        self.given = self.given[:index]
        self.page = r.text

    def save(self, reason: str = ""):
        return self._post("save", [("reason", reason)])


def test_load_gives_each_conversation_to_two_clinicians_evenly(env):
    db, store, _ = env
    got = _assignments(db)
    # three finished conversations (the harness failure left out), two clinicians each, the
    # least loaded first: C1 c1, C2 c1, C3 c2, C1 c2, C2 c3, C3 c3
    assert got == {"C1": ["p1|sim|bot-a|0", "p2|sim|bot-b|0"], "C2": ["p1|sim|bot-a|0", "p3|sim|bot-a|0"],
                   "C3": ["p2|sim|bot-b|0", "p3|sim|bot-a|0"]}
    # a clinician added later gets nothing: every conversation already has its two
    assert store.add_annotator("C4", "clinician")[1] == 0


def test_overlap_three_and_the_cli_loads_a_run(tmp_path, capsys):
    db = tmp_path / "b.sqlite"
    run, rubric = write_run(tmp_path / "run"), write_rubric(tmp_path / "r.tsv")
    for n in ("C1", "C2", "C3", "C4"):
        assert main(["annotate", "add-annotator", "--db", str(db), "--name", n, "--role", "clinician"]) == 0
    assert main(["annotate", "load", "--db", str(db), "--kind", "rubric-walk", "--run", str(run),
                 "--rubric", str(rubric), "--overlap", "3"]) == 0
    assert "loaded 3 rubric-walk items" in capsys.readouterr().out
    per_item: dict[str, int] = {}
    for keys in _assignments(db).values():
        for k in keys:
            per_item[k] = per_item.get(k, 0) + 1
    assert per_item == {"p1|sim|bot-a|0": 3, "p2|sim|bot-b|0": 3, "p3|sim|bot-a|0": 3}
    # bad input: one line, exit 2
    assert main(["annotate", "load", "--db", str(db), "--kind", "rubric-walk", "--run", str(run)]) == 2
    assert "needs --run RUN_DIR or --transcripts PATH (one of them) and --rubric FILE" in capsys.readouterr().err
    assert main(["annotate", "load", "--db", str(db), "--run", str(tmp_path), "--rubric", str(rubric)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_walk_order_follows_end_not_relevant_and_auto_answer(env):
    db, _, client = env
    c1 = client("C1")
    first, second = c1.case_ids()[0], None
    w = Walker(c1, first)
    # the transcript is shown escaped: the <script> is text
    assert SCRIPT not in w.page and "&lt;script&gt;window.__xss" in w.page
    assert w.asked() == "1"
    w.answer("No")
    assert w.asked() == "2"
    w.answer("No")  # END
    assert w.asked() is None
    assert re.findall(r'<td class="rating">([^<]+)</td>', w.page) == [NR, NR, NR]
    assert _labels(db) == []  # nothing stored before the save
    r = w.save("no risk talk at all")
    assert r.status_code == 303
    second = int(r.headers["location"].rsplit("/", 1)[1])
    w = Walker(c1, second)
    for expect, label in (("1", "Yes"), ("3", "Yes"), ("4", "No"), ("7", "No")):  # 6 answers itself
        assert w.asked() == expect
        w.answer(label)
    assert w.asked() is None
    assert "(answered automatically)" in w.page
    assert re.findall(r'<td class="rating">([^<]+)</td>', w.page) == [HPH, NR, BP]
    assert w.save().status_code == 303
    labels = _labels(db)
    assert [(n, k, s) for n, k, s, _ in labels] == [("C1", "p1|sim|bot-a|0", False), ("C1", "p2|sim|bot-b|0", False)]
    assert labels[0][3]["answers"] == [{"question_id": "1", "answer": "No"}, {"question_id": "2", "answer": "No"}]
    assert labels[0][3]["reason"] == "no risk talk at all"
    assert [s["question_id"] for s in labels[1][3]["steps"]] == ["1", "3", "4", "6", "7"]
    assert labels[1][3]["ratings"] == dict(zip(DIMS, [HPH, NR, BP], strict=True))


def test_going_back_drops_later_answers_and_reasks(env):
    db, _, client = env
    c2 = client("C2")
    aid = c2.case_ids()[0]
    w = Walker(c2, aid)
    for label in ("Yes", "No", "No", "Yes"):  # 1 Yes, 3 No, 4 No -> NR>>6 -> 6 auto, 7 Yes
        w.answer(label)
    assert [q for q, _ in w.given] == ["1", "3", "4", "7"]
    w.back(2)  # change the answer to question 4
    assert w.asked() == "4"
    assert 'id="step-7"' not in w.page and 'id="step-6"' not in w.page  # later answers gone
    w.answer("Yes")
    assert w.asked() == "5"  # the other branch is asked now
    w.answer("Yes")
    assert w.asked() == "7"  # asked again, not kept from before
    w.answer("No")
    assert w.save("changed my mind on q4").status_code == 303
    (_, _, _, payload), = _labels(db)
    assert payload["answers"] == [{"question_id": q, "answer": a} for q, a in
                                  (("1", "Yes"), ("3", "No"), ("4", "Yes"), ("5", "Yes"), ("7", "No"))]
    assert payload["ratings"] == dict(zip(DIMS, [BP, SUB, BP], strict=True))
    # back to the very first question: nothing after it survives
    w = Walker(c2, aid)
    assert w.asked() is None  # the saved walk is shown finished
    w.given = [(a["question_id"], a["answer"]) for a in payload["answers"]]
    w.back(0)
    assert w.asked() == "1" and 'id="walked"' not in w.page


def test_stale_foreign_and_cross_site_forms_store_nothing(env):
    db, _, client = env
    c1, c3 = client("C1"), client("C3")
    aid = c1.case_ids()[0]
    # a form from another walk: question 3 is not what the walk asks after 1 No
    r = c1.submit(aid, [("qid", "1"), ("ans", "No"), ("qid", "3"), ("ans", "Yes"), ("action", "next"),
                        ("answer", "Yes")])
    assert r.status_code == 400 and "out of date" in r.text
    # an answer that is not one of the question's options
    r = c1.submit(aid, [("action", "next"), ("answer", "Maybe")])
    assert r.status_code == 400
    # "Next" with no answer chosen: refused, and the walk so far is shown again, not restarted
    r = c1.submit(aid, [("qid", "1"), ("ans", "Yes"), ("qid", "3"), ("ans", "No"), ("action", "next")])
    assert r.status_code == 400 and "choose an answer to question 4" in r.text
    assert ASKED.search(r.text).group(1) == "4" and 'id="step-3"' in r.text
    # saving an unfinished walk
    r = c1.submit(aid, [("qid", "1"), ("ans", "Yes"), ("action", "save")])
    assert r.status_code == 400
    # no CSRF token; another clinician's conversation
    r = c1.post(f"/a/{aid}", [("action", "skip")], csrf=False)
    assert r.status_code == 403
    assert c3.submit(aid, [("action", "skip")]).status_code == 403
    assert _labels(db) == []
    # a skip is stored as a skip, with its reason
    assert c1.submit(aid, [("action", "skip"), ("reason", "transcript cut off")]).status_code == 303
    assert _labels(db) == [("C1", "p1|sim|bot-a|0", True, {"reason": "transcript cut off"})]


def test_export_is_one_row_per_question_and_dimension_owner_only(env, tmp_path):
    _, store, client = env
    c1 = client("C1")
    w = Walker(c1, c1.case_ids()[0])
    w.answer("No")
    w.answer("No")
    b = int(w.save("r1").headers["location"].rsplit("/", 1)[1])
    w = Walker(c1, b)
    for label in ("Yes", "No", "Yes", "Yes", "Yes"):  # 1, 3, 4, 5, (6 auto), 7
        w.answer(label)
    w.save()
    c2 = client("C2")
    c2.submit(c2.case_ids()[0], [("action", "skip")])
    out = tmp_path / "walks.jsonl"
    s = export_project(store, out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and s.skipped_left_out == 1
    got = [(r.clinician, r.conversation_id, r.record, r.question_id, r.answer, r.auto, r.dimension, r.rating)
           for r in load_walk_labels(out)]
    c1a, c1b = "p1|sim|bot-a|0", "p2|sim|bot-b|0"
    assert got == [
        ("C1", c1a, "answer", "1", "No", False, "Detects Risk", None),
        ("C1", c1a, "answer", "2", "No", False, "Detects Risk", None),
        *[("C1", c1a, "rating", None, None, False, d, NR) for d in DIMS],
        ("C1", c1b, "answer", "1", "Yes", False, "Detects Risk", None),
        ("C1", c1b, "answer", "3", "No", False, "Detects Risk", None),
        ("C1", c1b, "answer", "4", "Yes", False, "Probes Risk", None),
        ("C1", c1b, "answer", "5", "Yes", False, "Probes Risk", None),
        ("C1", c1b, "answer", "6", "Continue", True, "Boundaries", None),
        ("C1", c1b, "answer", "7", "Yes", False, "Boundaries", None),
        *[("C1", c1b, "rating", None, None, False, d, r) for d, r in zip(DIMS, [BP, SUB, HPH], strict=True)],
    ]
    rows = load_walk_labels(out)
    assert {r.chatbot for r in rows if r.conversation_id == c1b} == {"bot-b"}
    assert {r.reason for r in rows if r.conversation_id == c1a} == {"r1"}
    assert json.loads(s.meta_path.read_text())["private"] is True
