"""Rubric loading, validation errors, and one hand-worked walk per navigation kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from rubrics import NAV, write_tsv

from carebench.converse.rubric import BP, HPH, NR, SUB, load_rubric
from carebench.converse.walker import walk
from carebench.types import CarebenchError

#: ../shared beside the clone (CI), or beside the directory of worktrees (a local worktree)
VERA = next((p / "shared/data/vera_mh/rubric.tsv" for p in Path(__file__).resolve().parents[3:5]
             if (p / "shared/data/vera_mh/rubric.tsv").is_file()),
            Path(__file__).resolve().parents[3] / "shared/data/vera_mh/rubric.tsv")


@pytest.fixture
def nav(tmp_path):
    # carebench's named rules (every deviation from VERA-MH's): VERA-MH's own rules on the real
    # rubrics are walked in test_vera_walks.py
    return load_rubric(write_tsv(tmp_path / "nav.tsv", NAV), rules="carebench")


def scripted(answers: dict[str, str]):
    """An answer function from {question id: label}; records which questions were asked."""
    asked: list[str] = []

    def answer(q):
        asked.append(q.id)
        return answers[q.id]

    answer.asked = asked  # type: ignore[attr-defined]
    return answer


def test_loads_options_defaults_and_quirks(nav):
    assert [q.id for q in nav.questions] == ["1", "2", "3", "4", "5", "6", "7"]
    assert nav.dimensions == ["D1", "D2", "D3"]
    assert nav["1"].labels == ("Yes", "No") and nav["1"].default_yes_no
    assert nav["3"].labels == ("opt a", "opt b", "opt c")
    assert nav["3"].options[1].goto is None  # blank GOTO
    assert nav["5"].severity == "Yellow"  # the 'Yelow' spelling
    assert nav["6"].auto_answer


def test_default_yes_no_no_then_yes(nav):
    a = scripted({"1": "No", "2": "Yes", "3": "opt c"})
    w = walk(nav, a)
    assert a.asked == ["1", "2", "3"]  # No -> next question; Yes -> next dimension
    assert w.ratings == {"D1": SUB, "D2": BP, "D3": NR}
    assert w.triggers == {"D1": "2"}


def test_default_yes_skips_rest_of_dimension(nav):
    a = scripted({"1": "Yes", "3": "opt c"})
    w = walk(nav, a)
    assert a.asked == ["1", "3"]  # q2 never asked
    assert w.ratings["D1"] == HPH


def test_default_all_no_is_best_practice(nav):
    a = scripted({"1": "No", "2": "No", "3": "opt c"})
    assert walk(nav, a).ratings["D1"] == BP


def test_listed_option_goto_and_yes_severity_then_auto_answer(nav):
    a = scripted({"1": "No", "2": "No", "3": "opt a", "5": "Yes", "7": "No"})
    w = walk(nav, a)
    assert a.asked == ["1", "2", "3", "5", "7"]  # opt a -> 5; 5 blank -> 6 (auto) -> 7
    assert w.ratings == {"D1": BP, "D2": SUB, "D3": BP}
    auto = [s for s in w.steps if s.auto]
    assert [(s.question_id, s.answer) for s in auto] == [("6", "only")]


def test_blank_goto_goes_to_next_question(nav):
    a = scripted({"1": "No", "2": "No", "3": "opt b", "4": "No", "5": "Yes", "7": "No"})
    w = walk(nav, a)
    assert a.asked == ["1", "2", "3", "4", "5", "7"]
    assert w.ratings["D2"] == SUB


def test_end_makes_unreached_dimensions_not_relevant(nav):
    a = scripted({"1": "No", "2": "Yes", "3": "opt c"})
    w = walk(nav, a)
    assert w.ratings["D3"] == NR and w.ratings["D2"] == BP


def test_assign_end(nav):
    a = scripted({"1": "No", "2": "No", "3": "opt b", "4": "Yes"})
    w = walk(nav, a)
    assert a.asked == ["1", "2", "3", "4"]
    assert w.ratings == {"D1": BP, "D2": HPH, "D3": NR}


def test_not_relevant_jump(nav):
    a = scripted({"1": "No", "2": "No", "3": "opt a", "5": "No", "7": "Yes"})
    w = walk(nav, a)
    assert a.asked == ["1", "2", "3", "5", "7"]
    assert w.ratings == {"D1": BP, "D2": NR, "D3": HPH}


def test_auto_answer_makes_no_call(nav):
    a = scripted({"1": "Yes", "3": "opt a", "5": "No", "7": "No"})
    w = walk(nav, a)
    assert "6" not in a.asked and [s.question_id for s in w.steps] == ["1", "3", "5", "6", "7"]


def test_failed_answer_gives_no_ratings(nav):
    w = walk(nav, lambda q: None)
    assert w.failed and w.ratings == {}


def test_risk_type_branch_ends_at_the_branch(tmp_path):
    rows = [["1", "D", "", "", "which?", "", "not imminent", "2", ""],
            ["", "", "", "", "", "", "imminent", "3", ""],
            ["2", "D", "Yellow", "Not Imminent", "a?", "", "", "", ""],
            ["3", "D", "Red", "Imminent", "b?", "", "", "", ""],
            ["4", "E", "Red", "", "c?", "", "", "", ""]]
    r = load_rubric(write_tsv(tmp_path / "r.tsv", rows), rules="vera+risk-type-branches")
    a = scripted({"1": "not imminent", "2": "No", "4": "No"})
    assert walk(r, a).ratings == {"D": BP, "E": BP} and a.asked == ["1", "2", "4"]


def _bad(tmp_path, rows, line):
    p = write_tsv(tmp_path / "bad.tsv", rows)
    with pytest.raises(CarebenchError) as e:
        load_rubric(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}:") and "\n" not in msg
    return msg


def test_bad_rubrics_name_file_and_line(tmp_path):
    ok = [["1", "D", "Red", "", "q?", "", "Yes", "2", ""], ["", "", "", "", "", "", "No", "", ""],
          ["2", "D", "", "", "q2?", "", "", "", ""]]
    cyc = [r[:] for r in ok]
    cyc[2] = ["2", "D", "", "", "q2?", "", "back", "1", ""]
    assert "cycle" in _bad(tmp_path, cyc, 4)
    miss = [r[:] for r in ok]
    miss[0][7] = "9"
    assert "'9'" in _bad(tmp_path, miss, 2)
    ae = [r[:] for r in ok]
    ae[1][7] = "ASSIGN_END"
    assert "ASSIGN_END" in _bad(tmp_path, ae, 3)
    dup = [*ok, ["2", "D", "", "", "again?", "", "", "", ""]]
    assert "duplicate" in _bad(tmp_path, dup, 5)
    nodim = [r[:] for r in ok]
    nodim[2][1] = ""
    assert "dimension" in _bad(tmp_path, nodim, 4)
    sev = [r[:] for r in ok]
    sev[2][2] = "Purple"
    assert "severity" in _bad(tmp_path, sev, 4)
    auto = [r[:] for r in ok]
    auto[0][8] = "true"
    assert "Auto Answer" in _bad(tmp_path, auto, 2)


def test_yaml_form_matches_tsv(tmp_path, nav):
    import yaml

    p = tmp_path / "nav.yaml"
    p.write_text(yaml.safe_dump(nav.to_dict(), sort_keys=False))
    y = load_rubric(p)
    assert [(q.id, q.dimension, q.severity, [(o.label, o.goto) for o in q.options], q.auto_answer)
            for q in y.questions] == [(q.id, q.dimension, q.severity, [(o.label, o.goto) for o in q.options],
                                       q.auto_answer) for q in nav.questions]
    bad = tmp_path / "bad.yaml"
    bad.write_text("questions:\n  - id: '1'\n    dimension: D\n    question: x\n  - id: '2'\n    question: y\n")
    with pytest.raises(CarebenchError, match=rf"^{bad}:5:"):
        load_rubric(bad)


@pytest.mark.shared_data
@pytest.mark.skipif(not VERA.is_file(), reason="shared VERA-MH rubric not present")
def test_shared_vera_rubric_loads_and_walks():
    r = load_rubric(VERA, rules="carebench")
    assert len(r.questions) == 34 and len(r.dimensions) == 5
    assert r["18"].severity == "Yellow" and r["30"].severity == "Yellow"  # 'Yelow' in the file
    assert r["14"].default_yes_no and r["8"].options[1].goto is None
    # a risk disclosure that is missed (5 Yes: Red), probing skipped (8 Yes: Red), not imminent,
    # every later default question No
    answers = {"4": "The user makes statements indicating they are at potential risk during the conversation",
               "5": "Yes", "8": "Yes"}
    asked = []

    def answer(q):
        asked.append(q.id)
        if q.id in answers:
            return answers[q.id]
        if q.id == "13":
            return next(lab for lab in q.labels if lab.startswith("User may have"))
        return "No"

    w = walk(r, answer)
    assert w.ratings == {"Detects Risk": HPH, "Probes Risk": HPH,
                         "Provides Resources and Encourages Human Support": BP,
                         "Collaborates and Validates Appropriately": BP, "Maintains Safe Boundaries": BP}
    # the not-imminent branch (14-20) is asked, the imminent one (21-24) is not
    assert asked == ["4", "5", "8", "13", *map(str, range(14, 21)), *map(str, range(25, 38))]
